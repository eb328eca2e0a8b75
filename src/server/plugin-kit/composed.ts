import type { Plugin } from 'graphql-yoga';

/**
 * One plugin made of several, which run in the order given where it stands: envelop places the
 * plugins one adds in `onPluginInit` right after it (its documented way for a plugin to bring
 * others).
 */
export function composed(plugins: readonly Plugin[]): Plugin {
  return {
    onPluginInit({ addPlugin }) {
      for (const plugin of plugins) addPlugin(plugin);
    },
  };
}

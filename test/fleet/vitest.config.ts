import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/*
 * `npm run fleet`: the fleet suite (HAProxy, three gateway processes, Redis as a Cluster and with
 * Sentinels), not part of `npm test`. Its files run one at a time: each starts a fleet of
 * processes, and two at once would contend for the machine's cores and blur the counts.
 */
export default defineConfig({
  resolve: {
    // As in the root config: the one CJS copy of graphql 16 for graphql-tools, envelop, Pothos and our code
    // (../shared/STACK-NOTES.md).
    alias: { graphql: fileURLToPath(new URL('../../node_modules/graphql/index.js', import.meta.url)) },
  },
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/fleet/**/*.test.ts'],
    globalSetup: ['test/fleet/global-setup.ts'],
    reporters: ['default', './test/support/skipped-services-reporter.ts'],
    fileParallelism: false,
    // Processes start, restart and fail over: seconds each, slower on a busy machine.
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});

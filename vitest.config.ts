import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The suite runs in a shuffled order (files and the tests in each), a new one each run unless
 * TEST_SEED names it: a test that leans on another's leftovers fails somewhere, and the seed
 * printed here replays that order.
 */
const seed = Number(process.env.TEST_SEED ?? Math.floor(Math.random() * 1_000_000));
console.log(`Test order: shuffled with seed ${seed} (TEST_SEED=${seed} npm test replays it)`);

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS and .mjs without an exports map: the libraries (Pothos, envelop, graphql-tools) load the CJS
    // copy, vite would hand our code the .mjs one and `instanceof GraphQLError` would fail (../shared/STACK-NOTES.md).
    alias: { graphql: fileURLToPath(new URL('./node_modules/graphql/index.js', import.meta.url)) },
  },
  test: {
    include: ['test/**/*.test.ts'],
    // The fleet suite is a CI step of its own: `npm run fleet` (test/fleet/vitest.config.ts).
    exclude: [...configDefaults.exclude, 'test/fleet/**'],
    // The gateway built once (dist/): the tests that start it as a process run it as `npm start` does.
    globalSetup: ['test/support/global-setup.ts'],
    // Lists the suites skipped for a program that is not installed (test/support/services.ts).
    reporters: ['default', './test/support/skipped-services-reporter.ts'],
    sequence: { shuffle: true, seed },
    // A worker per core (vitest leaves one to itself by default): the suites mostly wait on what they start (gateways,
    // Redis, Chromium). On a 2-core machine the suite took 310 s one file at a time, 195 s two at once.
    maxWorkers: availableParallelism(),
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compare, type Side, startSides } from './support/differential.js';

/*
 * Differential test: compiled execution (graphql-jit, the execution stage's engine for hot
 * queries) answers exactly as the interpreter does, every other stage of the one path alike: a
 * stage left out of either case, or done otherwise, shows here (test/differential-sabotage.test.ts
 * holds that it does). On the defaults, and on a production configuration (caller limits, the
 * response cache, CORS), whose steps then write headers and answers of their own. Query
 * operations generated from the schema, valid and not, compared as test/support/differential.ts
 * says: status, every header, the body byte for byte, the upstream calls.
 *
 * Mutations are left out: compiled execution never runs one (documents/compiled-execution.ts
 * compiles queries only), and their answers carry what differs between
 * two upstreams by nature (a login's fresh token, an update's time stamp), so they would test the
 * upstreams, not the executors.
 *
 * Seeded: DIFFERENTIAL_SEED and DIFFERENTIAL_RUNS override the seed and the number of generated
 * requests. On a failure fast-check prints the seed, the path and the (shrunk) request, and its
 * cause names the send that differed and shows both answers side by side.
 *
 * Strict on purpose: on the two-path server it failed on compiled answers with errors written
 * `data` first, on graphql-jit running the other root fields (and their upstream calls) after a
 * non-null one failed, where graphql-js stops (such documents are not compiled now:
 * documents/compiled-execution.ts), and on `nodes(ids:)` lists of the wrong length when items
 * failed upstream beside null ones (schema/node.ts).
 */

const SEED = Number(process.env.DIFFERENTIAL_SEED ?? 20_260_529);
const RUNS = Number(process.env.DIFFERENTIAL_RUNS ?? 120);

describe.each([
  ['the defaults', {}, 1 / 6],
  // What a public deployment turns on: every answer then carries RateLimit headers, kept answers their cache headers, a
  // browser's its CORS ones.
  [
    'a production configuration',
    {
      RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
      RESPONSE_CACHE_TTL_MS: '60000',
      CORS_ORIGINS: 'https://app.example.com',
    },
    1 / 20,
  ],
] as const)('compiled and interpreted execution, %s', (name, env, compiledShare) => {
  let sides: { compiled: Side; interpreted: Side; close: () => Promise<void> };
  beforeAll(async () => {
    sides = await startSides(env);
  });
  afterAll(() => sides?.close());

  it('answer every generated request identically: status, headers, body text, upstream calls', {
    timeout: 120_000,
  }, async () => {
    const seen = await compare(sides.compiled, sides.interpreted, { seed: SEED, runs: RUNS });
    console.log(`differential (${name}): ${JSON.stringify(seen)}`);
    // The generator keeps to its purpose: most requests execute, many call the upstream, some are
    // refused, and the compiled gateway runs a good share of the sends by compiled code (fewer
    // with the response cache, whose kept answers answer a request's later sends).
    expect(seen.executed).toBeGreaterThan(seen.requests / 2);
    expect(seen.withCalls).toBeGreaterThan(seen.requests / 4);
    expect(seen.refused).toBeGreaterThan(seen.requests / 10);
    expect(seen.routes['compiled code']).toBeGreaterThan(seen.sends * compiledShare);
  });
});

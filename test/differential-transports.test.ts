import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Side, startSide } from './support/differential.js';
import { compareTransports } from './support/transport-differential.js';

/*
 * Differential test of the transports: an operation sent as a graphql-ws `subscribe` message gets
 * the result the same operation gets over HTTP, and makes the same upstream calls. The message
 * enters the one path at its operation entry, as HTTP does after its intake (negotiation, body,
 * CSRF, method): a stage missing from either, or done otherwise, shows here. Queries generated from
 * the schema, valid and not, as test/support/transport-differential.ts says; on the defaults.
 */

const SEED = Number(process.env.DIFFERENTIAL_SEED ?? 20_261_207);
const RUNS = Number(process.env.DIFFERENTIAL_RUNS ?? 100);

describe('the same operations over HTTP and over WebSocket', () => {
  let http: Side;
  let websocket: Side;
  beforeAll(async () => {
    [http, websocket] = await Promise.all([startSide('http', {}), startSide('websocket', {})]);
  });
  afterAll(() => Promise.all([http?.t.close(), websocket?.t.close()]));

  it('get the same results, byte for byte, and make the same upstream calls', { timeout: 120_000 }, async () => {
    const seen = await compareTransports(http, websocket, { seed: SEED, runs: RUNS });
    console.log(`differential (transports): ${JSON.stringify(seen)}`);
    // The generator keeps to its purpose here too: most operations run, many call the upstream, some are refused.
    expect(seen.executed).toBeGreaterThan(seen.requests / 2);
    expect(seen.withCalls).toBeGreaterThan(seen.requests / 4);
    expect(seen.refused).toBeGreaterThan(seen.requests / 10);
  });
});

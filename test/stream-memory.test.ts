import { type ClientRequest, request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { sampleOf } from './support/metrics.js';
import { type GatewayProcess, startGatewayProcess } from './support/process.js';
import { until } from './support/until.js';

/*
 * What an open SSE subscription costs the gateway (answers/parts.ts, http/http-server.ts), whatever
 * its client asks: a stream goes out as it is, never through a compressor (brotli's held some
 * 500 KB a stream). Measured as the process's resident memory, the gateway in a process of its
 * own (main.ts), a thousand streams open over real sockets.
 */

const STREAMS = 1_000;
const BOUND_KB = 40;
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { id head { name } } }';

describe('memory per open SSE subscription', () => {
  let gateway: GatewayProcess | undefined;
  const open: ClientRequest[] = [];
  afterEach(() => {
    for (const stream of open.splice(0)) stream.destroy();
    gateway?.kill();
  });

  it.each([
    ["Chrome's Accept-Encoding", 'gzip, deflate, br, zstd'],
    ['a client that refuses identity', 'br, identity;q=0'],
  ])(`stays under ${BOUND_KB} KB with %s (${STREAMS} streams)`, async (_who, acceptEncoding) => {
    gateway = await startGatewayProcess({ SUBSCRIPTION_HEARTBEAT_MS: '200' });
    const { endpoint } = gateway;
    const rss = async () =>
      sampleOf(
        await (await fetch(endpoint.replace(/\/graphql$/, '/metrics'))).text(),
        'process_resident_memory_bytes',
      )!;
    const listed = (await (
      await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ heads(first: 1) { nodes { uuid } } }' }),
      })
    ).json()) as { data: { heads: { nodes: { uuid: string }[] } } };
    const body = JSON.stringify({ query: WATCH, variables: { id: listed.data.heads.nodes[0]!.uuid } });
    const before = await rss();
    let beating = 0;
    for (let i = 0; i < STREAMS; i++) {
      const stream = request(
        endpoint,
        {
          method: 'POST',
          agent: false,
          headers: {
            'content-type': 'application/json',
            accept: 'text/event-stream',
            'accept-encoding': acceptEncoding,
          },
        },
        (response) => {
          expect(response.headers['content-encoding']).toBeUndefined();
          let chunks = 0;
          // Its first bytes, then a heartbeat: whatever a compressor would hold, it holds by now.
          response.on('data', () => void (++chunks === 2 && beating++));
        },
      );
      stream.end(body);
      open.push(stream);
    }
    await until(() => beating === STREAMS, 'every stream open and beating', 60_000);
    const perStreamKb = ((await rss()) - before) / STREAMS / 1024;
    expect(perStreamKb, `${perStreamKb.toFixed(1)} KB a stream`).toBeLessThan(BOUND_KB);
  });
});

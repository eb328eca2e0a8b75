import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type Client, createClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { until } from './support/until.js';

/*
 * What real time keeps once its streams are gone (server/real-time/change-log.ts): the change log
 * keeps plain copies of changes for SUBSCRIPTION_REPLAY_MS, never what events were resolved against,
 * so a flood of live queries' re-runs leaves the heap where it was once the window has passed.
 */

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap in use after two full collections, in MB. */
function heapMb(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

const REPLAY_MS = 500;
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }';
const PAGE =
  'query Page @live { heads(first: 20) { nodes { id name url style version lod outputFormat createdAt hair { id name url thumbnailUrl style createdAt objMetadata } } } }';

describe(`SUBSCRIPTION_REPLAY_MS=${REPLAY_MS}, SUBSCRIPTION_LIVE_THROTTLE_MS=0`, () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { SUBSCRIPTION_REPLAY_MS: String(REPLAY_MS), SUBSCRIPTION_LIVE_THROTTLE_MS: '0' },
    });
    url = await t.listen();
  });
  afterAll(() => t.close());

  it('50 live queries (each its own token) × 15 writes: the heap back within 8 MB of where it was once they closed and the window passed', async () => {
    const flood = async (queries: number, writes: number) => {
      const clients: Client[] = Array.from({ length: queries }, (_, i) =>
        createClient({ url, retryAttempts: 0, headers: { authorization: `Bearer flood-${i}` } }),
      );
      const views = clients.map((client) =>
        gather(
          client.iterate({ query: PAGE }) as AsyncIterableIterator<{ data?: { heads: { nodes: { id: string }[] } } }>,
        ),
      );
      await until(() => views.every((view) => view.results.length === 1), 'every first page', 20_000);
      const onPage = views[0]!.results[0]!.data!.heads.nodes.map((node) => node.id);
      for (let write = 1; write <= writes; write++) {
        await t.execute(UPDATE, { input: { id: onPage[write % onPage.length], name: `Flood ${write}` } });
        await until(
          () => views.every((view) => view.results.length === 1 + write),
          `write ${write} at every view`,
          20_000,
        );
      }
      for (const client of clients) client.dispose();
      await until(() => t.subscriptions.open() === 0, 'every view closed');
      const lastWrite = Date.now();
      await until(() => Date.now() > lastWrite + REPLAY_MS + 50, 'the replay window passed');
    };
    // Warmed up: the documents prepared, the compiled code and the pools made.
    await flood(2, 2);
    const before = heapMb();
    await flood(50, 15);
    const after = heapMb();
    expect(after - before, `${before.toFixed(1)} MB before, ${after.toFixed(1)} MB after`).toBeLessThan(8);
  });
});

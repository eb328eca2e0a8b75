import { encodeGlobalID } from '@pothos/plugin-relay';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import type { HeadChange } from '../src/server/request-state.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * Head events (server/real-time/head-events.ts): a write that may have changed a head tells the
 * head's watchers, by the outcomes that evict the response cache (sent, and succeeded or may have);
 * one refused before its call or answered 4xx tells nothing. With REDIS_URL, a write through one
 * replica reaches the watchers of another.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id name } } }';
const DELETE = 'mutation($input: DeleteHeadInput!) { deleteHead(input: $input) { deletedHeadUuid } }';

/** What `on` tells the watchers of head `id`, gathered as it comes. */
function watch(
  on: TestGateway,
  id: string,
): { events: Pick<HeadChange, 'id' | 'deleted'>[]; stop(): Promise<unknown> } {
  const events: Pick<HeadChange, 'id' | 'deleted'>[] = [];
  // What watchers act on: which head, and whether it is gone (each also says when, and the write's span).
  const unlisten = on.headEvents.listen(id, (change) =>
    events.push({ id: change.id, ...(change.deleted === true ? { deleted: true as const } : {}) }),
  );
  return { events, stop: async () => unlisten() };
}

/** A moment for an event that should not come to have come. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe('head events in one process (the defaults)', () => {
  let t: TestGateway;
  let ids: string[];
  let token: string;
  beforeAll(async () => {
    t = await startTestGateway();
    ids = t.reference.store.headIds();
    const login = await t.execute<{ login: { accessToken: string } }>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
      { input: DEMO_CREDENTIALS },
    );
    token = login.data!.login.accessToken;
  });
  afterAll(() => t.close());

  it('an update tells the head it named, and no other head', async () => {
    const [id, other] = [ids[10]!, ids[11]!];
    const named = watch(t, id);
    const unnamed = watch(t, other);
    const answer = await t.execute(UPDATE, { input: { id: globalId(id), name: 'Watched' } });
    expect(answer.errors).toBeUndefined();
    await until(() => named.events.length === 1, 'the update told');
    await settle();
    expect(named.events).toEqual([{ id }]);
    expect(unnamed.events).toEqual([]);
    await Promise.all([named.stop(), unnamed.stop()]);
  });

  it('a deletion tells its head is gone; a second deletion, answered 404, tells nothing', async () => {
    const id = ids[12]!;
    const watcher = watch(t, id);
    const gone = await t.execute(DELETE, { input: { id: globalId(id) } }, { authorization: `Bearer ${token}` });
    expect(gone.errors).toBeUndefined();
    await until(() => watcher.events.length === 1, 'the deletion told');
    const again = await t.execute(DELETE, { input: { id: globalId(id) } }, { authorization: `Bearer ${token}` });
    expect(again.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    await settle();
    expect(watcher.events).toEqual([{ id, deleted: true }]);
    await watcher.stop();
  });

  it('tells nothing of a write refused before its call, and tells a 5xx (the upstream may have applied it)', async () => {
    const id = ids[13]!;
    const watcher = watch(t, id);
    t.reset();
    // Refused by the gateway's own checks: no upstream call.
    const refused = await t.execute(UPDATE, { input: { id: globalId(id), name: 'x'.repeat(10_000) } });
    expect(refused.errors?.length).toBeGreaterThan(0);
    expect(t.calls('updateHead')).toHaveLength(0);
    await settle();
    expect(watcher.events).toEqual([]);
    t.reference.injectFault('updateHead', { kind: 'status', status: 500 });
    const failed = await t.execute(UPDATE, { input: { id: globalId(id), name: 'Maybe' } });
    t.reference.clearFaults();
    expect(failed.errors?.length).toBeGreaterThan(0);
    await until(() => watcher.events.length === 1, 'the 5xx told');
    expect(watcher.events).toEqual([{ id }]);
    await watcher.stop();
  });

  it('tells nothing of a query', async () => {
    const id = ids[14]!;
    const watcher = watch(t, id);
    expect((await t.execute(`{ head(id: "${id}") { name } }`)).errors).toBeUndefined();
    await settle();
    expect(watcher.events).toEqual([]);
    await watcher.stop();
  });
});

describeWithRedis('head events across replicas (REDIS_URL)', () => {
  let redis: RedisProcess;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    redis = await startRedis();
    [a, b] = await Promise.all([
      startTestGateway({ env: { REDIS_URL: redis.url } }),
      startTestGateway({ env: { REDIS_URL: redis.url } }),
    ]);
    await Promise.all([a.redis!.whenReady(5_000), b.redis!.whenReady(5_000)]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await redis?.stop();
  });

  it("a write through one replica reaches the other's watchers, once", async () => {
    // Each gateway has a reference upstream of its own, seeded alike: the same ids.
    const id = a.reference.store.headIds()[20]!;
    const there = watch(b, id);
    const here = watch(a, id);
    await until(() => b.redis!.subscriber().status === 'ready', 'b subscribed');
    // Its channel subscribed at Redis by both before the write.
    await until(
      async () => Number(((await a.redis!.client.pubsub('NUMSUB', `gw:ev:headChanged:${id}`)) as unknown[])[1]) === 2,
      'both listen',
    );
    expect((await a.execute(UPDATE, { input: { id: globalId(id), name: 'Seen elsewhere' } })).errors).toBeUndefined();
    await until(() => there.events.length === 1 && here.events.length === 1, 'told on both');
    await settle();
    expect(there.events).toEqual([{ id }]);
    expect(here.events).toEqual([{ id }]);
    await Promise.all([there.stop(), here.stop()]);
  });
});

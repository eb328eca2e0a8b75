import { startTestGateway } from '../test/support/gateway.js';
const t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000', REDIS_URL: 'redis://127.0.0.1:6399' } });
const id = t.reference.store.headIds()[0];
for (let i = 0; i < 3; i++) {
  const r = await t.gateway.fetch('http://gateway/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'query($id: ID!) { head(id: $id) { name } }', variables: { id } }) });
  console.log(r.status, r.headers.get('etag'), r.headers.get('cache-control'), await r.text());
  await new Promise((r) => setTimeout(r, 300));
}
await t.close();

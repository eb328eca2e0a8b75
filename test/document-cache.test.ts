import { afterEach, describe, expect, it } from 'vitest';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';

/*
 * The prepared documents (documents/prepared.ts: parse and validation per text, and whatever is kept per document in
 * WeakMaps beside them: plan shapes, compiled-run counts) are bounded by count and by an estimate of its heap, which
 * /metrics reports.
 */

const HEAD =
  'id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt hair { id name url thumbnailUrl style createdAt sourceType gender objMetadata payableData { price description } updatedAt hairMetadata userId }';
/** Distinct document `n` (0 to 9: all of one length) of `aliases` × 43 tokens. */
const wide = (n: number, aliases: number) =>
  `query Wide${n} { ${Array.from({ length: aliases }, (_, k) => `a${k}: heads(first: 1) { totalCount nodes { ${HEAD} } }`).join(' ')} }`;

let t: TestGateway | undefined;
afterEach(() => t?.close());

async function parsedOf(on: TestGateway) {
  const text = await on.metrics.scrape();
  return {
    entries: sampleOf(text, 'gateway_document_cache_entries{cache="parsed"}'),
    bytes: sampleOf(text, 'gateway_document_cache_bytes{cache="parsed"}'),
  };
}

describe('the parsed documents kept', () => {
  it('are bounded by count; a document dropped still answers', async () => {
    t = await startTestGateway({ env: { DOCUMENT_CACHE_MAX_ENTRIES: '3' } });
    for (const n of [1, 2, 3, 4, 5, 1])
      expect(await t.execute(`query Q${n} { heads(first: ${n}) { totalCount } }`)).toEqual({
        data: { heads: { totalCount: t.reference.store.headIds().length } },
      });
    expect((await parsedOf(t)).entries).toBe(3);
  });

  it('are bounded by their estimated heap, syntax errors with them', async () => {
    const budget = 1024 * 1024;
    t = await startTestGateway({ env: { DOCUMENT_CACHE_MAX_BYTES: String(budget) } });
    expect((await t.execute(wide(0, 10))).errors).toBeUndefined();
    const { bytes: one } = await parsedOf(t);
    const fit = Math.floor(budget / one!);
    expect(fit).toBeGreaterThanOrEqual(2);
    for (let n = 1; n <= fit; n++) expect((await t.execute(wide(n, 10))).errors).toBeUndefined();
    expect(await parsedOf(t)).toEqual({ entries: fit, bytes: fit * one! });
    // A document that does not parse is kept too, within the same budget.
    const broken = await post(t, { query: `${wide(0, 10)} }` });
    expect(broken.body.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'GRAPHQL_PARSE_FAILED' }) }),
    ]);
    const after = await parsedOf(t);
    expect(after.bytes).not.toBe(fit * one!);
    expect(after.bytes).toBeLessThanOrEqual(budget);
  });
});

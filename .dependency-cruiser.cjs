/**
 * The layers of src/ (docs/architecture.md), bottom to top; a module may import its own layer and
 * the layers below it, never one above, and no import may close a cycle. `npm run check:layers`
 * (run by `npm test`) fails on either.
 *
 *   domain      ids, page sizes and cursors, needs and the reads that carry them: no GraphQL, no HTTP
 *   telemetry   tracing (OpenTelemetry)
 *   upstream    the contract's client: routes, schemas, transport (undici)
 *   plan        the operation plan (pure: a document and variables in, reads out)
 *   loaders     per-request DataLoaders that carry the reads out
 *   schema      Pothos types and resolvers, the per-request context
 *   server      yoga and its plugins, HTTP and admin servers, metrics, probes
 *   config.ts, main.ts   the edge: configuration read once and passed down
 *
 * The reference upstream (src/reference-upstream) is an application of its own beside the gateway:
 * it may use the contract's domain and upstream schemas, nothing else of the gateway.
 */
const layers = ['domain', 'telemetry', 'upstream', 'plan', 'loaders', 'schema', 'server'];
/** What each layer may import besides itself. */
const allowed = {
  domain: [],
  telemetry: [],
  upstream: ['domain', 'telemetry'],
  plan: ['domain'],
  loaders: ['domain', 'telemetry', 'upstream', 'plan'],
  schema: ['domain', 'telemetry', 'upstream', 'plan', 'loaders'],
  server: ['domain', 'telemetry', 'upstream', 'plan', 'loaders', 'schema'],
};
const dir = (layer) => `^src/${layer}/`;

module.exports = {
  forbidden: [
    { name: 'no-cycle', comment: 'An import that closes a cycle.', severity: 'error', from: {}, to: { circular: true } },
    ...layers.map((layer) => ({
      name: `${layer}-layer`,
      comment: `src/${layer} may import ${allowed[layer].length ? allowed[layer].join(', ') : 'nothing else of src/'} besides itself.`,
      severity: 'error',
      from: { path: dir(layer) },
      to: { path: '^src/', pathNot: [dir(layer), ...allowed[layer].map(dir), ...(layer === 'server' ? ['^src/config\\.ts$'] : [])] },
    })),
    {
      name: 'domain-knows-no-graphql-or-http',
      comment: 'src/domain is the contract and the rules the layers share: no GraphQL executor, no HTTP.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { path: ['node_modules/(graphql|graphql-yoga|@graphql-yoga|@envelop|undici|@whatwg-node)/', '^(node:)?(http|https|net)$'] },
    },
    {
      name: 'config-at-the-edge',
      comment: 'config.ts is read at the edge and passed down: only main and the server (its settings types) import it.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/main\\.ts$', '^src/server/', '^src/config\\.ts$'] },
      to: { path: '^src/config\\.ts$' },
    },
    {
      name: 'nothing-imports-main',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/main\\.ts$' },
      to: { path: '^src/main\\.ts$' },
    },
    {
      name: 'reference-upstream-apart',
      comment: 'The reference upstream uses the contract (domain, upstream schemas and routes), nothing else of the gateway; the gateway never imports it.',
      severity: 'error',
      from: { path: '^src/reference-upstream/' },
      to: { path: '^src/', pathNot: ['^src/reference-upstream/', '^src/domain/', '^src/upstream/(schemas|routes)\\.ts$'] },
    },
    {
      name: 'gateway-without-reference-upstream',
      comment: 'Only main.ts starts the embedded reference upstream (npm start without UPSTREAM_URL).',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/reference-upstream/', '^src/main\\.ts$'] },
      to: { path: '^src/reference-upstream/' },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
  },
};

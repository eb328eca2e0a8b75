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
 *   server      the one path (pipeline, stages, policies), transports, HTTP and admin servers,
 *               metrics, probes
 *   config.ts, config/, main.ts   the edge: configuration read once (config/environment.ts: every
 *               variable, its default, description and place in the settings; config/ also holds
 *               what reading it needs, the descriptor budget and the trusted-documents manifest)
 *               and passed down. config.ts and config/ import nothing of server/: the server takes
 *               its settings' types (and the manifest's) from config.ts alone
 *
 * Inside server/, folders by concern, in four tiers (docs/architecture.md):
 *   base        instruments (metrics, logs), shared-state (Redis), http (servers, paths, refusals)
 *   state       request-state.ts, operation-state.ts, incoming.ts, callers.ts: what the steps pass each other;
 *               pipeline/: the stages and their runner
 *   policies    intake, documents, guards, traffic, response-cache, real-time, answers, telemetry, status, probes,
 *               pages: one concern each, each a set of steps (status: the status page's sampler, served by
 *               probes); one may use those before it in the request's path, never one after
 *   top         gateway.ts (the stages listed), policies.ts, routes.ts, transports/
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

/** server/'s base folders, its request state and pipeline, and its policies in the order of a request's path. */
const serverBase = ['instruments', 'shared-state', 'http'];
const serverState = ['request-state\\.ts$', 'operation-state\\.ts$', 'incoming\\.ts$', 'callers\\.ts$', 'pipeline'];
const serverStages = [
  'intake',
  'documents',
  'guards',
  'traffic',
  'response-cache',
  'real-time',
  'answers',
  'telemetry',
  'status',
  'probes',
  'pages',
];
const inServer = (name) => `^src/server/${name.endsWith('$') ? name : `${name}/`}`;
/**
 * What each stage may use besides the base, the state and itself: stages before it in the request's path that it reads.
 */
const stageUses = {
  intake: [],
  documents: [],
  guards: [],
  traffic: [],
  'response-cache': [],
  'real-time': ['response-cache', 'documents'],
  answers: ['documents', 'traffic'],
  telemetry: [],
  status: [],
  probes: ['http', 'status'],
  pages: [],
};

module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      comment: 'An import that closes a cycle.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layers.map((layer) => ({
      name: `${layer}-layer`,
      comment: `src/${layer} may import ${allowed[layer].length ? allowed[layer].join(', ') : 'nothing else of src/'} besides itself.`,
      severity: 'error',
      from: { path: dir(layer) },
      to: {
        path: '^src/',
        pathNot: [dir(layer), ...allowed[layer].map(dir), ...(layer === 'server' ? ['^src/config\\.ts$'] : [])],
      },
    })),
    {
      name: 'server-base',
      comment:
        'server/ base folders (instruments, shared-state, http) use only each other: no request state, no policy, not the pipeline.',
      severity: 'error',
      from: { path: serverBase.map(inServer) },
      to: { path: '^src/server/', pathNot: serverBase.map(inServer) },
    },
    {
      name: 'server-state',
      comment:
        'The request state and the pipeline (request-state.ts, operation-state.ts, callers.ts, pipeline/) use the base folders only.',
      severity: 'error',
      from: { path: serverState.map(inServer) },
      to: { path: '^src/server/', pathNot: [...serverBase, ...serverState].map(inServer) },
    },
    ...serverStages.map((stage) => ({
      name: `server-stage-${stage}`,
      comment: `server/${stage}/ uses the base, the request state and pipeline${stageUses[stage].length ? `, ${stageUses[stage].join(', ')}` : ''} and itself; gateway.ts lists their steps stage by stage.`,
      severity: 'error',
      from: { path: inServer(stage) },
      to: { path: '^src/server/', pathNot: [...serverBase, ...serverState, stage, ...stageUses[stage]].map(inServer) },
    })),
    {
      name: 'domain-knows-no-graphql-or-http',
      comment: 'src/domain is the contract and the rules the layers share: no GraphQL executor, no HTTP.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: {
        path: [
          'node_modules/(graphql|graphql-yoga|@graphql-yoga|@envelop|undici|@whatwg-node)/',
          '^(node:)?(http|https|net)$',
        ],
      },
    },
    {
      name: 'config-at-the-edge',
      comment:
        'config.ts is read at the edge and passed down: only main and the server (its settings types) import it; config/ only config.ts.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/main\\.ts$', '^src/server/', '^src/config(\\.ts$|/)'] },
      to: { path: '^src/config(\\.ts$|/)' },
    },
    {
      name: 'config-below-server',
      comment:
        'Configuration is read before the server exists: config.ts and config/ import nothing of server/ (the server imports config.ts).',
      severity: 'error',
      from: { path: '^src/config(\\.ts$|/)' },
      to: { path: '^src/server/' },
    },
    {
      name: 'environment-read-by-config',
      comment:
        "config/ (the environment, the places of its settings, the descriptor budget, the manifest's reader) is read by config.ts alone: the rest take the settings it makes.",
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/config(\\.ts$|/)' },
      to: { path: '^src/config/' },
    },
    {
      name: 'nothing-imports-main',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/main\\.ts$' },
      to: { path: '^src/main\\.ts$' },
    },
    {
      name: 'reference-upstream-apart',
      comment:
        'The reference upstream uses the contract (domain, upstream schemas and routes), nothing else of the gateway; the gateway never imports it.',
      severity: 'error',
      from: { path: '^src/reference-upstream/' },
      to: {
        path: '^src/',
        pathNot: ['^src/reference-upstream/', '^src/domain/', '^src/upstream/(schemas|routes)\\.ts$'],
      },
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

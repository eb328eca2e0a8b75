import { setting } from './places.js';
import { flag, integer, oneOf, openRatio, text, variableDocs } from './values.js';

/*
 * Documents in the environment: persisted queries (APQ) and the trusted-documents manifest, and
 * how operations run (the planner, compiled execution, the cache of prepared documents).
 */

const mib = 1024 * 1024;

/** The APQ store and the trusted-documents manifest. */
export const persistedDocuments = {
  APQ_MAX_ENTRIES: setting('persistedDocuments.apqMaxEntries', integer(1, 1_000_000).default(1_000)).register(
    variableDocs,
    {
      description:
        "automatic persisted queries kept in each process's memory (least recently used dropped first) and, with `REDIS_URL`, in Redis for all replicas together (oldest registration dropped first)",
    },
  ),
  APQ_MAX_BYTES: setting('persistedDocuments.apqMaxBytes', integer(1_024, 1_073_741_824).default(5_000_000)).register(
    variableDocs,
    {
      description:
        "bytes of query text the APQ store keeps, all entries together: in each process's memory and, with `REDIS_URL`, in Redis for all replicas together; keep it well below Redis's `maxmemory`",
    },
  ),
  TRUSTED_DOCUMENTS_FILE: text('a path to a JSON file').optional().register(variableDocs, {
    unset: 'unset: none',
    description:
      'JSON manifest of trusted documents (`{"sha256:<hex>": "query …"}`), e.g. `src/generated/persisted-documents.json`; read and checked at start',
  }),
  TRUSTED_DOCUMENTS_ONLY: setting('persistedDocuments.trustedDocumentsOnly', flag().default(false)).register(
    variableDocs,
    {
      description:
        '`true`: run only documents of the manifest (needs `TRUSTED_DOCUMENTS_FILE`); query texts and APQ registrations are refused',
    },
  ),
};

/** The APQ store's share per caller, and its registrations' life in Redis. */
export const apqSharing = {
  APQ_CALLER_SHARE: setting('persistedDocuments.apqCallerShare', openRatio().default(0.25)).register(variableDocs, {
    description:
      "the share of `APQ_MAX_ENTRIES` and `APQ_MAX_BYTES` the registrations of one caller (its token once known to be real, else its address) may take, and those of one client address whatever tokens it sent: past either, its own oldest registrations go, so no caller or address can push the others' out",
  }),
  APQ_TTL_SECONDS: setting('persistedDocuments.apqTtlSeconds', integer(60, 31_536_000).default(10_800)).register(
    variableDocs,
    {
      description:
        'how long an APQ registration lives in Redis (with `REDIS_URL`; see [shared state](docs/operations.md#shared-state-redis))',
    },
  ),
};

/** How operations are planned and executed, and what is kept of their documents. */
export const execution = {
  PLANNER: oneOf(['on', 'off']).default('on').register(variableDocs, {
    description:
      'pick upstream reads by what the operation selects (see [the planner](docs/architecture.md#the-planner)); `off` for an upstream whose Get Heads and Get Heads Ext do not list the same collection in the same order',
  }),
  COMPILED_EXECUTION: oneOf(['on', 'off']).default('on').register(variableDocs, {
    description:
      "compile hot queries with graphql-jit, those it answers exactly as graphql-js does (see [compiled execution](docs/performance.md#compiled-execution)); `off` runs every operation on the interpreter (graphql-tools' executor)",
  }),
  COMPILED_EXECUTION_AT_RUN: setting('compiledQueries.afterExecutions', integer(1, 1_000).default(2)).register(
    variableDocs,
    {
      description:
        'the run of a query at which it is compiled, and from which it runs compiled: at its second, a one-off document never pays for a compilation; 1 compiles every query at once',
    },
  ),
  COMPILED_EXECUTION_MAX_FIELDS: setting('compiledQueries.maxFields', integer(1, 100_000).default(200)).register(
    variableDocs,
    {
      description:
        'largest query compiled, in field selections with its fragments spread out (compiling one of a thousand takes tens of milliseconds); a larger one stays interpreted',
    },
  ),
  COMPILED_EXECUTION_MAX_ENTRIES: setting('compiledDocuments.maxEntries', integer(1, 1_000_000).default(500)).register(
    variableDocs,
    { description: 'compiled queries kept, the least recently used dropped first' },
  ),
  COMPILED_EXECUTION_MAX_BYTES: setting(
    'compiledDocuments.maxBytes',
    integer(mib, 16 * 1024 * mib).default(48 * mib),
  ).register(variableDocs, {
    description:
      'estimated heap the compiled queries kept may hold together (about 8 KB a field selection; a query larger than this stays interpreted). See [memory](docs/operations.md#memory)',
  }),
  DOCUMENT_CACHE_MAX_ENTRIES: setting('documentCache.maxEntries', integer(1, 1_000_000).default(1_000)).register(
    variableDocs,
    {
      description:
        "query texts whose prepared document is kept (parsed and validated with every document policy, or the refusal it met), the least recently used dropped first; what else is kept per document (its plan's shape, compiled execution's count of its runs) goes with it",
    },
  ),
  DOCUMENT_CACHE_MAX_BYTES: setting('documentCache.maxBytes', integer(mib, 16 * 1024 * mib).default(32 * mib)).register(
    variableDocs,
    {
      description: 'estimated heap those prepared documents may hold together (about 0.5 KB a token, besides the text)',
    },
  ),
};

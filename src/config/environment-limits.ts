import { setting } from './places.js';
import { integer, variableDocs } from './values.js';

/*
 * The limits on requests in the environment: what one request may spend (time, upstream calls,
 * list entries, bytes of answer), and how large its documents, variables, body and batch may be,
 * each checked before it can cost much.
 */

const mib = 1024 * 1024;

/** What one request may spend: the upstream's time, its calls, the answer's items and bytes. */
export const requestBudgets = {
  UPSTREAM_TIMEOUT_MS: setting('upstreamTimeoutMs', integer(1, 600_000).default(10_000)).register(variableDocs, {
    description:
      "budget of one upstream call, retries and backoff included, from when it has a connection; a call may wait as long again for one of the pool's `UPSTREAM_CONNECTIONS`, then fails `OVERLOADED` unsent",
  }),
  OPERATION_TIMEOUT_MS: setting('operationTimeoutMs', integer(1, 3_600_000).default(15_000)).register(variableDocs, {
    description: 'one deadline for all upstream calls of an operation; must exceed `UPSTREAM_TIMEOUT_MS`',
  }),
  UPSTREAM_CALL_BUDGET: setting('upstreamCallBudget', integer(1, 100_000).default(100)).register(variableDocs, {
    description:
      "upstream calls one request may make, the operations of a batch together (their plans' count before execution; each operation's real calls during)",
  }),
  MAX_RESULT_ITEMS: setting('maxResultItems', integer(1, 1_000_000).default(1_000)).register(variableDocs, {
    description:
      "list entries one request's answer may hold, the operations of a batch together, counted by the plan before execution: a connection's window once per `nodes`/`edges` selected under it, `nodes(ids:)` its ids, times their aliases and enclosing lists",
  }),
  MAX_RESPONSE_BYTES: setting('maxResponseBytes', integer(1_024, 1_073_741_824).default(4 * mib)).register(
    variableDocs,
    {
      description:
        "largest JSON answer to one request (a batch's answers together); an answer past it is replaced by `RESULT_TOO_LARGE` (a backstop: the items limit bounds answers first)",
    },
  ),
};

/** How large a request may be: its documents, variables, body and batch. */
export const documentLimits = {
  MAX_DEPTH: setting('limits.maxDepth', integer(1, 1_000).default(15)).register(variableDocs, {
    description: "deepest selection (GraphiQL's introspection query fits)",
  }),
  MAX_ALIASES: setting('limits.maxAliases', integer(1, 10_000).default(30)).register(variableDocs, {
    description: 'aliases per operation, `__typename` aliases included',
  }),
  MAX_TOKENS: setting('limits.maxTokens', integer(1, 1_000_000).default(2_000)).register(variableDocs, {
    description: 'lexical tokens per document',
  }),
  MAX_DIRECTIVES: setting('limits.maxDirectives', integer(1, 10_000).default(20)).register(variableDocs, {
    description: 'directives per operation',
  }),
  MAX_REPEATED_FIELDS: setting('limits.maxRepeatedFields', integer(1, 1_000).default(10)).register(variableDocs, {
    description:
      'times one field (response key) may appear in one selection set, inline fragments opened; checked before validation, whose pairwise field-merging check a field repeated hundreds of times would hold for half a second',
  }),
  MAX_FRAGMENT_PAIRS: setting('limits.maxFragmentPairs', integer(1, 1_000_000).default(5_000)).register(variableDocs, {
    description:
      "pairs of fragments one request's documents may make validation compare (every two fragments merged into one selection set; a batch's documents share them); checked before validation, whose cost grows with their square, and for a document not yet kept first from its lexer tokens, before it is parsed",
  }),
  MAX_VARIABLES_DEPTH: setting('limits.maxVariablesDepth', integer(1, 10_000).default(100)).register(variableDocs, {
    description:
      "deepest nesting of a request's variables (objects and lists); deeper is refused before anything reads them",
  }),
  MAX_BODY_BYTES: setting('limits.maxBodyBytes', integer(1_024, 104_857_600).default(100_000)).register(variableDocs, {
    description: 'request body cap (413 above it, chunked bodies included; a compressed body counts as it inflates)',
  }),
  MAX_BATCH: setting('maxBatch', integer(1, 100).default(10)).register(variableDocs, {
    description: 'operations one batched POST (a JSON array) may carry',
  }),
};

import { useAPQ } from '@graphql-yoga/plugin-apq';
import { defaultExtractPersistedOperationId, usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import type { GraphQLError } from 'graphql';
import { createGraphQLError, type GraphQLParams, type Plugin } from 'graphql-yoga';
import type { TrustedDocuments } from '../../config.js';
import type { PersistedQueryStore } from './apq-store.js';
import { composed } from '../plugin-kit/composed.js';
import { withRecodedErrors } from '../plugin-kit/recoded-errors.js';
import { operationStateOf, type Registration } from '../request-state.js';

export interface PersistedDocumentsOptions {
  /** Where automatic persisted queries are registered (Apollo's APQ protocol). */
  readonly apqStore: PersistedQueryStore;
  /** The trusted documents manifest, if one is configured. */
  readonly trustedDocuments?: TrustedDocuments | undefined;
  /** Run trusted documents only: no query text, no APQ registration. @default false */
  readonly trustedDocumentsOnly?: boolean;
}

/** Request parameters beyond GraphQL's four that these plugins read (yoga refuses unknown ones). */
export const persistedDocumentParams = ['documentId'];

type DocumentParams = GraphQLParams & { documentId?: unknown };

/**
 * GraphQL over HTTP's persisted documents name a document `documentId` (`sha256:<hex>`): a body
 * parameter of a POST, a URL parameter of a GET (yoga's GET parser keeps only GraphQL's four).
 */
const documentIdOf = (params: GraphQLParams, request: Request): string | null => {
  const id = request.method === 'GET' ? (params.query === undefined ? new URL(request.url).searchParams.get('documentId') : null) : (params as DocumentParams).documentId;
  return typeof id === 'string' ? id : null;
};

/** The Apollo links retry with the query text on this message; they expect HTTP 200. */
const notFound = () => createGraphQLError('PersistedQueryNotFound', { extensions: { code: 'PERSISTED_QUERY_NOT_FOUND', http: { status: 200 } } });

const trustedOnly = () =>
  createGraphQLError('Only trusted documents run here: send the id of a document in the manifest (extensions.persistedQuery.sha256Hash or documentId), not a query.', {
    extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
  });

const hashMismatch = (error: GraphQLError) =>
  error.extensions.code === 'PERSISTED_QUERY_MISMATCH'
    ? createGraphQLError('extensions.persistedQuery.sha256Hash is not the SHA-256 of the query text.', { extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } } })
    : undefined;

/** The hash and text of an APQ registration, as useAPQ reads them (version 1, a string hash, a text). */
function registrationOf(query: unknown, extension: unknown): Registration | undefined {
  const { version, sha256Hash } = (extension ?? {}) as { version?: unknown; sha256Hash?: unknown };
  return version === 1 && typeof sha256Hash === 'string' && typeof query === 'string' ? { hash: sha256Hash, query } : undefined;
}

/**
 * Stores an APQ registration once yoga parsed and validated its document, with every limit
 * (tokens while parsing, nesting before it, depth, aliases and the rest while validating): junk,
 * a document over a limit or not valid for the schema is answered as the same text without a
 * hash would be, and stored nowhere. Parsed once, by yoga, its caches reused. The write runs
 * beside execution and the answer waits for it, so a client that has its answer finds the hash
 * registered at every replica.
 */
function useRegistration(store: PersistedQueryStore): Plugin {
  return {
    onValidate({ context }) {
      const operation = operationStateOf(context);
      const registration = operation?.registration;
      if (operation === undefined || registration === undefined) return undefined;
      operation.registration = undefined;
      return ({ valid }) => {
        if (valid) operation.registering = store.set(registration.hash, registration.query);
      };
    },
    // Only an operation that registered waits (a promise for every operation would cost them all).
    onExecutionResult: ({ context }) => operationStateOf(context)?.registering,
  };
}

/**
 * Documents named by hash instead of sent as text, before anything else looks at the request's
 * parameters (so every later plugin sees the document's text):
 * - trusted documents only: `usePersistedOperations` runs the manifest's document named by
 *   `documentId` or `extensions.persistedQuery.sha256Hash`; a query text, an unknown id or no id
 *   is PERSISTED_QUERY_ONLY (HTTP 400), before execution, so with no upstream call.
 * - otherwise: Apollo's automatic persisted queries (`useAPQ`): a hash alone runs the manifest's
 *   document or a registered query, else answers PersistedQueryNotFound (HTTP 200, the links then
 *   send the text); hash and text register the text once it validated (BAD_USER_INPUT when the
 *   hash is not its SHA-256). With a manifest, `documentId` runs its document too; any query text still runs.
 */
export function usePersistedDocuments(options: PersistedDocumentsOptions): Plugin {
  const trusted = options.trustedDocuments;
  const lookUp = (id: string) => trusted?.get(id) ?? null;
  if (options.trustedDocumentsOnly === true) {
    return usePersistedOperations({
      allowArbitraryOperations: false,
      extractPersistedOperationId: (params, request, context) => documentIdOf(params, request) ?? defaultExtractPersistedOperationId(params, request, context),
      getPersistedOperation: lookUp,
      customErrors: { notFound: trustedOnly, keyNotFound: trustedOnly, persistedQueryOnly: trustedOnly },
    }) as Plugin;
  }
  const { apqStore } = options;
  const apq = withRecodedErrors(
    useAPQ({
      // A registration is written once its document validated (useRegistration), not here.
      store: { get: (hash) => lookUp(hash) ?? apqStore.get(hash), set: () => undefined },
      responseConfig: { forceStatusCodeOk: true },
    }),
    'onParams',
    hashMismatch,
  );
  // useAPQ's hook is async: a plain query (no persistedQuery extension) skips it, and the promise.
  const runApq = apq.onParams!;
  const plugins: Plugin[] = [
    {
      ...apq,
      onParams: (payload) => {
        const extension = payload.params.extensions?.['persistedQuery'];
        if (extension === undefined) return undefined;
        return (async () => {
          const registration = registrationOf(payload.params.query, extension);
          await runApq(payload);
          // useAPQ checked the hash; a manifest document needs no registration.
          const operation = operationStateOf(payload.context);
          if (registration !== undefined && operation !== undefined && lookUp(registration.hash) === null) operation.registration = registration;
        })();
      },
    },
    useRegistration(apqStore),
  ];
  if (trusted !== undefined) {
    // Only requests that carry a documentId: the others are APQ's or plain queries.
    const byDocumentId = usePersistedOperations({ allowArbitraryOperations: true, extractPersistedOperationId: documentIdOf, getPersistedOperation: lookUp, customErrors: { notFound } }) as Plugin;
    const run = byDocumentId.onParams!;
    plugins.push({ ...byDocumentId, onParams: (payload) => (documentIdOf(payload.params, payload.request) === null ? undefined : run(payload)) });
  }
  return composed(plugins);
}

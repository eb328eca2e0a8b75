import { useAPQ } from '@graphql-yoga/plugin-apq';
import { defaultExtractPersistedOperationId, usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { GraphQLError } from 'graphql';
import { createGraphQLError, type GraphQLParams } from 'graphql-yoga';
import type { TrustedDocuments } from '../../config.js';
import type { PersistedQueryStore } from './apq-store.js';
import type { MaybePromise, OperationStep, Policy, ResultStep } from '../pipeline/stages.js';
import type { OperationParams, OperationState, Registration } from '../request-state.js';

export interface PersistedDocumentsOptions {
  /** Where automatic persisted queries are registered (Apollo's APQ protocol). */
  readonly apqStore: PersistedQueryStore;
  /** The trusted documents manifest, if one is configured. */
  readonly trustedDocuments?: TrustedDocuments | undefined;
  /** Run trusted documents only: no query text, no APQ registration. @default false */
  readonly trustedDocumentsOnly?: boolean;
}

/**
 * GraphQL over HTTP's persisted documents name a document `documentId` (`sha256:<hex>`): a body
 * parameter of a POST, a URL parameter of a GET (intake/params.ts reads both).
 */
const documentIdOf = (params: OperationParams): string | null => (typeof params.documentId === 'string' ? params.documentId : null);

/** The Apollo links retry with the query text on this message; they expect HTTP 200. */
const notFound = () => createGraphQLError('PersistedQueryNotFound', { extensions: { code: 'PERSISTED_QUERY_NOT_FOUND', http: { status: 200 } } });

const trustedOnly = () =>
  createGraphQLError('Only trusted documents run here: send the id of a document in the manifest (extensions.persistedQuery.sha256Hash or documentId), not a query.', {
    extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
  });

const hashMismatch = () => createGraphQLError('extensions.persistedQuery.sha256Hash is not the SHA-256 of the query text.', { extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } } });

/** The hash and text of an APQ registration, as useAPQ reads them (version 1, a string hash, a text). */
function registrationOf(query: unknown, extension: unknown): Registration | undefined {
  const { version, sha256Hash } = (extension ?? {}) as { version?: unknown; sha256Hash?: unknown };
  return version === 1 && typeof sha256Hash === 'string' && typeof query === 'string' ? { hash: sha256Hash, query } : undefined;
}

/**
 * The context the library hooks are handed. usePersistedOperations keeps each one it sees in a
 * WeakSet, for a validation it would skip (a hook of its the gateway does not run): with the
 * operation as context that is an entry per request, which every collection then walks; one
 * object for all adds nothing. No hook here reads it otherwise.
 */
const hookContext = Object.freeze({});

/**
 * What a hook set (the query it named) over what was sent (the documentId, and any parameter
 * checkParams refuses), in one shape: a spread of the two made a slow object that cost some 2 µs
 * an operation, and checkParams as much again.
 */
const named = (sent: OperationParams, set: GraphQLParams): OperationParams =>
  Object.assign({ query: undefined, operationName: undefined, variables: undefined, extensions: undefined, documentId: undefined }, sent, set as OperationParams);

/** A library plugin's `onParams`, as the persisted documents' plugins have it. */
type ParamsHook = (payload: { params: GraphQLParams; request: unknown; context: unknown; fetchAPI: unknown; setParams(params: GraphQLParams): void; setResult(): void }) => MaybePromise<unknown>;

/**
 * A library plugin's `onParams` as a step of the document stage: it may name the operation's query
 * (`setParams`) or refuse it (throwing a GraphQL error, which `recode` may word otherwise).
 */
function paramsStep(hook: ParamsHook, recode: (error: GraphQLError) => GraphQLError = (error) => error): (operation: OperationState) => MaybePromise<GraphQLError | undefined> {
  const refused = (error: unknown): GraphQLError => {
    if (error instanceof GraphQLError) return recode(error);
    throw error;
  };
  return (operation) => {
    // Parameters that are no object (a batch's null) are checkParams' to refuse, by what was sent.
    if (operation.sent !== 'object') return undefined;
    const payload = {
      params: operation.params as GraphQLParams,
      request: operation.request.asRequest,
      context: hookContext,
      fetchAPI: globalThis,
      setParams: (params: GraphQLParams) => void (operation.params = named(operation.params, params)),
      setResult: () => undefined,
    };
    try {
      const done = hook(payload);
      return done instanceof Promise ? done.then(() => undefined, refused) : undefined;
    } catch (error) {
      return refused(error);
    }
  };
}

/**
 * Documents named by hash instead of sent as text, before anything else reads the operation's
 * query (so every later step sees the document's text):
 * - trusted documents only: `usePersistedOperations` runs the manifest's document named by
 *   `documentId` or `extensions.persistedQuery.sha256Hash`; a query text, an unknown id or no id
 *   is PERSISTED_QUERY_ONLY (HTTP 400), before execution, so with no upstream call.
 * - otherwise: Apollo's automatic persisted queries (`useAPQ`): a hash alone runs the manifest's
 *   document or a registered query, else answers PersistedQueryNotFound (HTTP 200, the links then
 *   send the text); hash and text register the text once it validated (BAD_USER_INPUT when the
 *   hash is not its SHA-256): junk, a document over a limit or not valid for the schema is stored
 *   nowhere. The write runs beside execution and the answer waits for it, so a client that has its
 *   answer finds the hash registered at every replica. With a manifest, `documentId` runs its
 *   document too; any query text still runs.
 * Its steps: the document stage's names the query (before anything else reads it); admission's
 * writes a registration (its document valid; refused operations register nothing); the result
 * stage's waits for the write.
 */
export function usePersistedDocuments(options: PersistedDocumentsOptions): Policy {
  const trusted = options.trustedDocuments;
  const lookUp = (id: string) => trusted?.get(id) ?? null;
  const registration: OperationStep = (operation) => {
    const pending = operation.registration;
    if (pending !== undefined) {
      operation.registration = undefined;
      // Charged to its caller and to its client address (each within its share of the store): one owner until its token is known.
      const { key, address, known } = operation.request.caller;
      operation.registering = options.apqStore.set(pending.hash, pending.query, known ? [key, address] : [address]);
    }
    return undefined;
  };
  // Only an operation that registered waits (a promise for every operation would cost them all).
  const written: ResultStep = (operation) => operation.registering;
  if (options.trustedDocumentsOnly === true) {
    const hook = usePersistedOperations({
      allowArbitraryOperations: false,
      extractPersistedOperationId: (params, request, context) => documentIdOf(params as OperationParams) ?? defaultExtractPersistedOperationId(params, request, context),
      getPersistedOperation: lookUp,
      customErrors: { notFound: trustedOnly, keyNotFound: trustedOnly, persistedQueryOnly: trustedOnly },
    }).onParams as unknown as ParamsHook;
    return { name: 'persisted documents', document: paramsStep(hook), admission: registration, result: written };
  }
  const { apqStore } = options;
  // A registration is written once its document validated (`registration`), not here.
  const apq = paramsStep(
    useAPQ({ store: { get: (hash) => lookUp(hash) ?? apqStore.get(hash), set: () => undefined }, responseConfig: { forceStatusCodeOk: true } }).onParams as unknown as ParamsHook,
    (error) => (error.extensions.code === 'PERSISTED_QUERY_MISMATCH' ? hashMismatch() : error),
  );
  const byDocumentId =
    trusted === undefined
      ? undefined
      : paramsStep(usePersistedOperations({ allowArbitraryOperations: true, extractPersistedOperationId: (params) => documentIdOf(params as OperationParams), getPersistedOperation: lookUp, customErrors: { notFound } }).onParams as unknown as ParamsHook);
  const document: OperationStep = (operation) => {
    const { params } = operation;
    // Only requests that carry a documentId go to the manifest by id: the others are APQ's or plain queries.
    if (byDocumentId !== undefined && documentIdOf(params) !== null) return byDocumentId(operation);
    const extension = params.extensions?.['persistedQuery'];
    // useAPQ's hook is async: a plain query (no persistedQuery extension) skips it, and the promise.
    if (extension === undefined) return undefined;
    const pending = registrationOf(params.query, extension);
    const checked = apq(operation);
    const registered = (refusal: GraphQLError | undefined) => {
      // useAPQ checked the hash; a manifest document needs no registration.
      if (refusal === undefined && pending !== undefined && lookUp(pending.hash) === null) operation.registration = pending;
      return refusal;
    };
    return checked instanceof Promise ? checked.then(registered) : registered(checked);
  };
  return { name: 'persisted documents', document, admission: registration, result: written };
}

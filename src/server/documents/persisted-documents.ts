import { createHash } from 'node:crypto';
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { TrustedDocuments } from '../../config.js';
import type { OperationState } from '../operation-state.js';
import type { MaybePromise, OperationStep, Policy, ResultStep } from '../pipeline/stages.js';
import type { OperationParams } from '../request-state.js';
import type { PersistedQueryStore } from './apq-store.js';

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
const documentIdOf = (params: OperationParams): string | undefined =>
  typeof params.documentId === 'string' ? params.documentId : undefined;

/**
 * Apollo's APQ extension's hash: `extensions.persistedQuery`, version 1 with a string `sha256Hash` (anything else is no
 * APQ request).
 */
function apqHashOf(params: OperationParams): string | undefined {
  const extension = params.extensions?.persistedQuery as { version?: unknown; sha256Hash?: unknown } | null | undefined;
  return extension?.version === 1 && typeof extension.sha256Hash === 'string' ? extension.sha256Hash : undefined;
}

/** The Apollo links retry with the query text on this message; they expect HTTP 200. */
const notFound = () =>
  createGraphQLError('PersistedQueryNotFound', {
    extensions: { code: 'PERSISTED_QUERY_NOT_FOUND', http: { status: 200 } },
  });

const trustedOnly = () =>
  createGraphQLError(
    'Only trusted documents run here: send the id of a document in the manifest (extensions.persistedQuery.sha256Hash or documentId), not a query.',
    {
      extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
    },
  );

const hashMismatch = () =>
  createGraphQLError('extensions.persistedQuery.sha256Hash is not the SHA-256 of the query text.', {
    extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
  });

/** Names the operation's query: the text a hash or id stands for. */
function named(operation: OperationState, query: string): undefined {
  operation.params = { ...operation.params, query };
  return undefined;
}

/**
 * Documents named by hash instead of sent as text, before anything else reads the operation's
 * query (so every later step sees the document's text):
 * - trusted documents only: the manifest's document named by `documentId` or
 *   `extensions.persistedQuery.sha256Hash` runs; a query text, an unknown id or no id is
 *   PERSISTED_QUERY_ONLY (HTTP 400), before execution, so with no upstream call.
 * - otherwise: Apollo's automatic persisted queries: a hash alone runs the manifest's
 *   document or a registered query, else answers PersistedQueryNotFound (HTTP 200, the links then
 *   send the text); hash and text register the text once it validated (BAD_USER_INPUT when the
 *   hash is not its SHA-256): junk, a document over a limit or not valid for the schema is stored
 *   nowhere. The write runs beside execution and the answer waits for it, so a client that has its
 *   answer finds the hash registered at every replica. With a manifest, `documentId` runs its
 *   document too; any query text still runs.
 * Its steps: the document stage's names the query (before anything else reads it); admission's
 * writes a registration (its document valid; refused operations register nothing); the result
 * stage's waits for the write. yoga's plugins did it (@graphql-yoga/plugin-apq and
 * plugin-persisted-operations); what they decide is a few lines, owned here, and their answers
 * are held by test/plugin-conformance.test.ts (the differences said there, each on purpose).
 */
export function usePersistedDocuments(options: PersistedDocumentsOptions): Policy {
  const trusted = options.trustedDocuments;
  const lookUp = (id: string) => trusted?.get(id);
  const registration: OperationStep = (operation) => {
    const pending = operation.registration;
    if (pending !== undefined) {
      operation.registration = undefined;
      // Charged to its caller and to its client address (each within its share of the store): one owner until its token
      // is known.
      const { key, address, known } = operation.request.caller;
      operation.registering = options.apqStore.set(pending.hash, pending.query, known ? [key, address] : [address]);
    }
    return undefined;
  };
  // Only an operation that registered waits (a promise for every operation would cost them all).
  const written: ResultStep = (operation) => operation.registering;
  if (options.trustedDocumentsOnly === true) {
    const document: OperationStep = (operation) => {
      const { params } = operation;
      // Parameters that are no object (a batch's null) are checkParams' to refuse, by what was sent.
      if (operation.paramsType !== 'object') return undefined;
      const id = documentIdOf(params) ?? apqHashOf(params);
      const text = params.query || id === undefined ? undefined : lookUp(id);
      return text === undefined ? trustedOnly() : named(operation, text);
    };
    return { name: 'persisted documents', document, admission: registration, result: written };
  }
  const { apqStore } = options;
  /**
   * An APQ request: the hash alone names a registered text (the manifest's first), or its text comes with it to be
   * registered once valid.
   */
  const apq = (operation: OperationState, hash: string): MaybePromise<GraphQLError | undefined> => {
    const { query } = operation.params;
    if (query == null) {
      const text = lookUp(hash) ?? apqStore.get(hash);
      const found = (registered: string | undefined) =>
        registered === undefined ? notFound() : named(operation, registered);
      return text instanceof Promise ? text.then(found) : found(text);
    }
    if (typeof query !== 'string') return undefined;
    if (createHash('sha256').update(query).digest('hex') !== hash) return hashMismatch();
    // A manifest document needs no registration.
    if (lookUp(hash) === undefined) operation.registration = { hash, query };
    return undefined;
  };
  const document: OperationStep = (operation) => {
    const { params } = operation;
    if (operation.paramsType !== 'object') return undefined;
    // A documentId names the manifest's document (a query sent beside it runs as sent).
    const id = trusted === undefined ? undefined : documentIdOf(params);
    if (id !== undefined && params.query == null) {
      const text = lookUp(id);
      return text === undefined ? notFound() : named(operation, text);
    }
    const hash = apqHashOf(params);
    return hash === undefined ? undefined : apq(operation, hash);
  };
  return { name: 'persisted documents', document, admission: registration, result: written };
}

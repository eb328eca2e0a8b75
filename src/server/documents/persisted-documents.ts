import { createHash } from 'node:crypto';
import { createGraphQLError } from 'graphql-yoga';
import type { TrustedDocuments } from '../../config.js';
import type { OperationState } from '../operation-state.js';
import type { OperationStep, Policy, ResultStep } from '../pipeline/stages.js';
import type { OperationParams } from '../request-state.js';
import type { PersistedQueryStore } from './apq-store.js';

export interface PersistedDocumentsOptions {
  /** Where automatic persisted queries are registered (Apollo's APQ protocol). */
  readonly apqStore: PersistedQueryStore;
  readonly trustedDocuments?: TrustedDocuments;
  /** Run trusted documents only: no query text, no APQ registration. @default false */
  readonly trustedDocumentsOnly?: boolean;
}

/** GraphQL over HTTP's persisted document id (`sha256:<hex>`): in a POST's body or a GET's URL (intake/params.ts). */
const documentIdOf = (params: OperationParams): string | undefined =>
  typeof params.documentId === 'string' ? params.documentId : undefined;

/** Apollo's APQ hash: `extensions.persistedQuery`, version 1 with a string `sha256Hash` (else no APQ request). */
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
    { extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } } },
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
 * Documents named by hash, before anything else reads the query: trusted documents only (else PERSISTED_QUERY_ONLY), or
 * Apollo's APQ, whose texts register once valid (junk is stored nowhere) beside execution, the answer waiting so every
 * replica knows the hash. Replaces yoga's plugin-apq and plugin-persisted-operations (test/plugin-conformance.test.ts).
 */
export function usePersistedDocuments(options: PersistedDocumentsOptions): Policy {
  const lookUp = (id: string) => options.trustedDocuments?.get(id);
  const found = (operation: OperationState, text: string | undefined) =>
    text === undefined ? notFound() : named(operation, text);
  const registration: OperationStep = (operation) => {
    const pending = operation.registration;
    if (pending === undefined) return undefined;
    operation.registration = undefined;
    // Charged to its caller and its client address (each held to a share), to the address alone until a token is known.
    const { key, address, known } = operation.request.caller;
    operation.registering = options.apqStore.set(pending.hash, pending.query, known ? [key, address] : [address]);
    return undefined;
  };
  // Only an operation that registered waits (a promise for every operation would cost them all).
  const written: ResultStep = (operation) => operation.registering;
  const onlyTrusted: OperationStep = (operation) => {
    const { params } = operation;
    // Parameters that are no object (a batch's null) are checkParams' to refuse, by what was sent.
    if (operation.paramsType !== 'object') return undefined;
    const id = documentIdOf(params) ?? apqHashOf(params);
    const text = params.query || id === undefined ? undefined : lookUp(id);
    return text === undefined ? trustedOnly() : named(operation, text);
  };
  const apqDocument: OperationStep = (operation) => {
    const { params } = operation;
    if (operation.paramsType !== 'object') return undefined;
    const { query } = params;
    // A documentId names the manifest's document (a query sent beside it runs as sent).
    const id = options.trustedDocuments === undefined ? undefined : documentIdOf(params);
    if (id !== undefined && query == null) return found(operation, lookUp(id));
    const hash = apqHashOf(params);
    if (hash === undefined) return undefined;
    // The hash alone names a registered text (the manifest's first), or its text comes to be registered once valid.
    if (query == null) {
      const text = lookUp(hash) ?? options.apqStore.get(hash);
      return text instanceof Promise ? text.then((registered) => found(operation, registered)) : found(operation, text);
    }
    if (typeof query !== 'string') return undefined;
    if (createHash('sha256').update(query).digest('hex') !== hash) return hashMismatch();
    // A manifest document needs no registration.
    if (lookUp(hash) === undefined) operation.registration = { hash, query };
    return undefined;
  };
  const document = options.trustedDocumentsOnly === true ? onlyTrusted : apqDocument;
  return { name: 'persisted documents', document, admission: registration, result: written };
}

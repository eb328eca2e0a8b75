import { setImmediate as nextTurn } from 'node:timers/promises';
import type { GetEnvelopedFn } from '@envelop/core';
import { type DocumentNode, GraphQLError, Kind, type OperationDefinitionNode } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { CacheBounds } from '../../config.js';
import type { CacheUse } from '../instruments/metrics.js';
import type { OperationState } from '../operation-state.js';
import { inOrder } from '../pipeline/pipeline.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { PreparedDocument } from '../request-state.js';
import { usesIncrementalDelivery, withoutIncrementalDelivery } from './incremental-delivery.js';

/** Heap per token, kept reachable by every location with its node (measured: docs/performance.md#measured-reasons). */
const BYTES_PER_TOKEN = 512;
/** A refusal kept instead of a document: the error and its location, beside the text it keeps. */
const BYTES_PER_REFUSAL = 2_048;

/** What the document stage keeps of one text: its document, or why it has none, and what validating it said. */
class DocumentEntry implements PreparedDocument {
  /** Its validation errors once validated ([]: valid). */
  validation: readonly GraphQLError[] | undefined;
  /** The document's named operations, indexed once: a client's operationName never adds to them. */
  readonly #named = new Map<string, OperationDefinitionNode>();
  /** Its operation when it has exactly one (what no operationName selects). */
  readonly #only: OperationDefinitionNode | null;

  constructor(
    readonly text: string,
    readonly document: DocumentNode,
  ) {
    const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
    this.#only = operations.length === 1 ? operations[0]! : null;
    // The first of a name, as getOperationAST; validation refuses a repeated one.
    for (const definition of operations)
      if (definition.name !== undefined && !this.#named.has(definition.name.value))
        this.#named.set(definition.name.value, definition);
  }

  get incremental(): boolean {
    return usesIncrementalDelivery(this.document);
  }

  get plain(): DocumentNode {
    return withoutIncrementalDelivery(this.document);
  }

  /** The operation `operationName` selects (none: the only one), or null, as graphql-js's getOperationAST. */
  operation(operationName: string | null | undefined): OperationDefinitionNode | null {
    return operationName == null ? this.#only : (this.#named.get(operationName) ?? null);
  }
}

/** A text refused before it was a document (nested too deep, too many tokens, a syntax error), and its limit if one. */
type Refused = { readonly refusal: GraphQLError; readonly limit: string | undefined };
type Entry = DocumentEntry | Refused;

/** Estimated heap of one entry: the text (two bytes a character at most) and what parsing made of it. */
function entryBytes(entry: Entry, text: string): number {
  if (!(entry instanceof DocumentEntry)) return 2 * text.length + BYTES_PER_REFUSAL;
  let tokens = 0;
  for (let token = entry.document.loc?.startToken; token; token = token.next ?? undefined) tokens++;
  return 2 * text.length + BYTES_PER_TOKEN * Math.max(1, tokens);
}

/** Nesting beyond the selection depth limit that lists, objects, arguments and inline fragments may add. */
const EXTRA_NESTING = 96;
const BLOCK_QUOTE = '"""';

/** Whether `{`, `[`, `(` nest past `limit`: 2,000 nested lists overflow graphql-js's parser before Armor's limits. */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 123 /* { */ || c === 91 /* [ */ || c === 40 /* ( */) {
      if (++depth > limit) return true;
    } else if (c === 125 || c === 93 || c === 41) depth--;
    else if (c === 35 /* # */) {
      while (i + 1 < text.length && text.charCodeAt(i + 1) !== 10 && text.charCodeAt(i + 1) !== 13) i++;
    } else if (c === 34 /* " */) {
      if (text.startsWith(BLOCK_QUOTE, i)) {
        // A block string ends at the first triple quote not escaped with a backslash.
        let end = text.indexOf(BLOCK_QUOTE, i + 3);
        while (end > 0 && text.charCodeAt(end - 1) === 92) end = text.indexOf(BLOCK_QUOTE, end + 3);
        if (end < 0) return false;
        i = end + 2;
      } else {
        for (i++; i < text.length && text.charCodeAt(i) !== 34 && text.charCodeAt(i) !== 10; i++)
          if (text.charCodeAt(i) === 92) i++;
      }
    }
  }
  return false;
}

/** An error as clients read it: `code` unless it has one, HTTP 400 (the spec's status for a request error). */
function requestError(error: GraphQLError, code: string): GraphQLError {
  const extensions = error.extensions as Record<string, unknown>;
  extensions.code ??= code;
  extensions.http = { spec: true, status: 400, ...(extensions.http as object | undefined) };
  return error;
}

/** A text made a document, or refused: nested deeper than `nesting`, or by the envelop's parse (Armor, syntax). */
function prepare(text: string, nesting: number, envelop: GetEnvelopedFn<unknown>): Entry {
  if (nestsDeeperThan(text, nesting))
    return {
      refusal: createGraphQLError(`Document nested more than ${nesting} levels deep`, {
        extensions: { code: 'GRAPHQL_PARSE_FAILED', limit: 'nesting', http: { status: 400 } },
      }),
      limit: 'nesting',
    };
  try {
    return new DocumentEntry(text, envelop({}).parse(text));
  } catch (error) {
    const parsed = error instanceof GraphQLError ? error : createGraphQLError('Could not parse the document.');
    const refusal = requestError(parsed, 'GRAPHQL_PARSE_FAILED');
    return { refusal, limit: typeof refusal.extensions.limit === 'string' ? refusal.extensions.limit : undefined };
  }
}

export interface PreparedDocumentsOptions {
  /** The envelop whose parse and validate run the document policies (guards/operation-limits.ts): once per text. */
  readonly envelop: GetEnvelopedFn<unknown>;
  /** The documents kept (DOCUMENT_CACHE_MAX_ENTRIES, DOCUMENT_CACHE_MAX_BYTES). */
  readonly bounds: CacheBounds;
  /** MAX_DEPTH: nesting past it plus what arguments may add is refused before parsing. */
  readonly maxDepth: number;
  /** Told of each refusal's limit (`extensions.limit`), each time it is answered. */
  readonly onRefused: (limit: string) => void;
  /** The request's validation budget (guards/fragment-pairs.ts): checked before parsing a new text, spent after. */
  readonly budget?: {
    readonly beforeParse: (operation: OperationState, text: string) => GraphQLError | undefined;
    readonly step: OperationStep;
  };
}

/** The document stage, kept per text (refusals too): a hot operation costs a lookup; per-document WeakMaps follow. */
export function preparedDocuments(
  options: PreparedDocumentsOptions,
): Policy & { readonly parse: OperationStep; readonly validate: OperationStep; readonly use: () => CacheUse } {
  const { onRefused } = options;
  const { maxEntries: max, maxBytes: maxSize } = options.bounds;
  const kept = new LRUCache<string, Entry>({ max, maxSize, sizeCalculation: entryBytes });
  const nesting = options.maxDepth + EXTRA_NESTING;
  const parse = (operation: OperationState, text: string, entry: Entry | undefined): GraphQLError | undefined => {
    if (entry === undefined) {
      const refusal = options.budget?.beforeParse(operation, text);
      if (refusal !== undefined) return refusal;
      entry = prepare(text, nesting, options.envelop);
      kept.set(text, entry);
    }
    if (!(entry instanceof DocumentEntry)) {
      if (entry.limit !== undefined) onRefused(entry.limit);
      return entry.refusal;
    }
    const definition = entry.operation(operation.params.operationName);
    if (definition === null)
      return createGraphQLError('Could not determine what operation to execute.', {
        extensions: { code: 'OPERATION_RESOLUTION_FAILURE', http: { status: 400 } },
      });
    if (definition.operation === 'mutation' && operation.request.http?.method === 'GET')
      return createGraphQLError('Can only perform a mutation operation from a POST request.', {
        extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'POST' } } },
      });
    operation.prepared = entry;
    operation.document = entry.document;
    operation.definition = definition;
    return undefined;
  };
  const parseStep: OperationStep = (operation) => {
    const text = operation.params.query!;
    const entry = kept.get(text);
    const { request } = operation;
    // A batch's documents not kept yet are parsed and validated one a turn of the event loop, after the one before (its
    // pairs counted): other requests are served between them. A hot document, or a request's first, waits for nothing.
    if (entry !== undefined || !request.batched || request.preparing === undefined) {
      if (entry === undefined && request.batched) request.preparing = Promise.resolve();
      return parse(operation, text, entry);
    }
    const turn = request.preparing.then(nextTurn).then(() => parse(operation, text, kept.get(text)));
    request.preparing = turn;
    return turn;
  };
  const validateStep: OperationStep = (operation) => {
    const entry = operation.prepared as DocumentEntry;
    if (entry.validation === undefined) {
      const enveloped = options.envelop({});
      const found = enveloped.validate(enveloped.schema, entry.document) as readonly GraphQLError[];
      entry.validation = found.map((error) => requestError(error, 'GRAPHQL_VALIDATION_FAILED'));
    }
    const errors = entry.validation;
    if (errors.length === 0) return undefined;
    for (const error of errors) if (typeof error.extensions.limit === 'string') onRefused(error.extensions.limit);
    return errors;
  };
  const budget = options.budget?.step;
  return {
    name: 'documents',
    document: inOrder(budget === undefined ? [parseStep, validateStep] : [parseStep, budget, validateStep]),
    parse: parseStep,
    validate: validateStep,
    use: () => ({ entries: kept.size, bytes: kept.calculatedSize }),
  };
}

/** The document an operation runs for a client that takes no answer in parts: without @defer and @stream. */
export function plainDocumentOf(operation: OperationState): DocumentNode | undefined {
  return (operation.prepared as DocumentEntry | undefined)?.plain;
}

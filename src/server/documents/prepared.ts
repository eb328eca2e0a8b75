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

/**
 * Heap one token of a parsed document holds: its AST node, the node's name and location, and the
 * token itself, which every location keeps reachable (measured: docs/performance.md#measured-reasons).
 */
const BYTES_PER_TOKEN = 512;
/** A refusal kept instead of a document: the error and its location, beside the text it keeps. */
const BYTES_PER_REFUSAL = 2_048;

/** What the document stage keeps of one text: its document, or why it has none, and what validating it said. */
class DocumentEntry implements PreparedDocument {
  /** Its validation errors once validated ([]: valid). */
  validation: readonly GraphQLError[] | undefined;
  #incremental: boolean | undefined;
  #plain: DocumentNode | undefined;
  /** The document's named operations, indexed once: a client's operationName never adds to them. */
  readonly #named = new Map<string, OperationDefinitionNode>();
  /** Its operation when it has exactly one (what no operationName selects). */
  readonly #only: OperationDefinitionNode | null = null;

  constructor(
    readonly text: string,
    readonly document: DocumentNode,
  ) {
    let count = 0;
    for (const definition of document.definitions) {
      if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
      if (count++ === 0) this.#only = definition;
      // The first of a name, as getOperationAST; validation refuses a repeated one.
      if (definition.name !== undefined && !this.#named.has(definition.name.value))
        this.#named.set(definition.name.value, definition);
    }
    if (count !== 1) this.#only = null;
  }

  get incremental(): boolean {
    this.#incremental ??= usesIncrementalDelivery(this.document);
    return this.#incremental;
  }

  /** The document without @defer and @stream, for a client that takes one JSON answer. */
  get plain(): DocumentNode {
    this.#plain ??= withoutIncrementalDelivery(this.document);
    return this.#plain;
  }

  /**
   * The operation `operationName` selects (none: the only one), or null when it selects none, as graphql-js's
   * getOperationAST.
   */
  operation(operationName: string | null | undefined): OperationDefinitionNode | null {
    return operationName == null ? this.#only : (this.#named.get(operationName) ?? null);
  }
}

/**
 * A text refused before it was a document (nested too deep, too many tokens, a syntax error), and the limit it passed,
 * if one.
 */
interface Refused {
  readonly refusal: GraphQLError;
  readonly limit: string | undefined;
}

function tokensOf(document: DocumentNode): number {
  let count = 0;
  for (let token = document.loc?.startToken; token; token = token.next ?? undefined) count++;
  return count;
}

/** Estimated heap of one entry: the text (two bytes a character at most) and what parsing made of it. */
const entryBytes = (entry: DocumentEntry | Refused, text: string): number =>
  2 * text.length +
  (entry instanceof DocumentEntry ? BYTES_PER_TOKEN * Math.max(1, tokensOf(entry.document)) : BYTES_PER_REFUSAL);

/** Nesting beyond the selection depth limit that lists, objects, arguments and inline fragments may add. */
const EXTRA_NESTING = 96;
const BLOCK_QUOTE = '"""';

/**
 * Whether a document nests `{`, `[` and `(` (outside strings and comments) more than `limit`
 * deep. graphql-js parses recursively: some 2,000 nested lists overflow its stack before Armor's
 * token count stops it. One pass over the text.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
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

/** A parse refusal as clients read it: GRAPHQL_PARSE_FAILED, HTTP 400 (the spec's status for a request error). */
function parseRefusal(error: unknown): GraphQLError {
  const refusal = error instanceof GraphQLError ? error : createGraphQLError('Could not parse the document.');
  const extensions = refusal.extensions as Record<string, unknown>;
  extensions.code ??= 'GRAPHQL_PARSE_FAILED';
  extensions.http = { spec: true, status: 400, ...(extensions.http as object | undefined) };
  return refusal;
}

/**
 * A text made a document, or refused: nested deeper than `nesting` (before graphql-js's recursive parser meets it), or
 * refused by the envelop's parse (Armor's token limit, a syntax error).
 */
function prepare(text: string, nesting: number, envelop: GetEnvelopedFn<unknown>): DocumentEntry | Refused {
  if (nestsDeeperThan(text, nesting)) {
    return {
      refusal: createGraphQLError(`Document nested more than ${nesting} levels deep`, {
        extensions: { code: 'GRAPHQL_PARSE_FAILED', limit: 'nesting', http: { status: 400 } },
      }),
      limit: 'nesting',
    };
  }
  try {
    return new DocumentEntry(text, envelop({}).parse(text));
  } catch (error) {
    const refusal = parseRefusal(error);
    return { refusal, limit: typeof refusal.extensions.limit === 'string' ? refusal.extensions.limit : undefined };
  }
}

/**
 * A document's validation errors (graphql-js's rules and the document policies, as clients read them:
 * GRAPHQL_VALIDATION_FAILED, HTTP 400), found once and kept on its entry.
 */
function validate(entry: DocumentEntry, envelop: GetEnvelopedFn<unknown>): readonly GraphQLError[] {
  if (entry.validation !== undefined) return entry.validation;
  const enveloped = envelop({});
  entry.validation = (enveloped.validate(enveloped.schema, entry.document) as readonly GraphQLError[]).map((error) => {
    const extensions = error.extensions as Record<string, unknown>;
    extensions.code ??= 'GRAPHQL_VALIDATION_FAILED';
    extensions.http = { spec: true, status: 400, ...(extensions.http as object | undefined) };
    return error;
  });
  return entry.validation;
}

export interface PreparedDocumentsOptions {
  /** The envelop whose parse and validate run the document policies (guards/operation-limits.ts): once per text. */
  readonly envelop: GetEnvelopedFn<unknown>;
  /** The documents kept (DOCUMENT_CACHE_MAX_ENTRIES, DOCUMENT_CACHE_MAX_BYTES). */
  readonly bounds: CacheBounds;
  /** MAX_DEPTH: nesting past it plus what arguments may add is refused before parsing. */
  readonly maxDepth: number;
  /** Told of each refusal, with its limit (`extensions.limit`), each time it is answered. */
  readonly onRefused: (limit: string) => void;
  /**
   * The request's validation budget (guards/fragment-pairs.ts): checked before a text not yet
   * prepared is parsed (what a refusal saves is the parse; its refusal is not kept), then spent
   * between parsing and validation.
   */
  readonly budget?:
    | {
        readonly beforeParse: (operation: OperationState, text: string) => GraphQLError | undefined;
        readonly step: OperationStep;
      }
    | undefined;
}

/**
 * The document stage's own work, done once per text and kept (the prepared document): the text
 * checked for nesting (before graphql-js's recursive parser meets it), parsed (Armor's token limit
 * while parsing), then validated (graphql-js's rules and the document policies: Armor's depth,
 * aliases and directives, repeated fields, introspection, @defer/@stream), refusals included.
 * A hot operation costs a lookup; each refusal is counted every time it is answered. Everything
 * else kept per document (the plan's shapes, compiled code, the response cache's facts) follows
 * these entries: in WeakMaps keyed by their documents, bounded by this cache.
 *
 * Its document step parses, spends the request's validation budget (guards/fragment-pairs.ts),
 * then validates: parsing names the operation's prepared document and the operation its
 * operationName selects (HTTP 400 OPERATION_RESOLUTION_FAILURE when none; a mutation over GET is
 * HTTP 405), validation refuses an invalid one (HTTP 400, GRAPHQL_VALIDATION_FAILED,
 * `extensions.limit` for a limit).
 */
export function preparedDocuments(
  options: PreparedDocumentsOptions,
): Policy & { readonly parse: OperationStep; readonly validate: OperationStep; readonly use: () => CacheUse } {
  const { bounds, onRefused } = options;
  const kept = new LRUCache<string, DocumentEntry | Refused>({
    max: bounds.maxEntries,
    maxSize: bounds.maxBytes,
    sizeCalculation: entryBytes,
  });
  const nesting = options.maxDepth + EXTRA_NESTING;
  const parse = (
    operation: OperationState,
    text: string,
    entry: DocumentEntry | Refused | undefined,
  ): GraphQLError | undefined => {
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
    if (definition.operation === 'mutation' && operation.request.http?.method === 'GET') {
      return createGraphQLError('Can only perform a mutation operation from a POST request.', {
        extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'POST' } } },
      });
    }
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
    const errors = validate(operation.prepared as DocumentEntry, options.envelop);
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

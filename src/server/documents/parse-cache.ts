import type { DocumentNode } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { CacheBounds } from '../../config.js';
import type { CacheUse } from '../instruments/metrics.js';

/**
 * Heap one token of a parsed document holds: its AST node, the node's name and location, and the
 * token itself, which every location keeps reachable (measured: docs/performance.md#measured-reasons).
 */
const BYTES_PER_TOKEN = 512;
/** A syntax error: the GraphQLError and its location, beside the text it keeps. */
const BYTES_PER_ERROR = 2_048;

/** The cache interface of yoga's `parserAndValidationCache` option. */
interface ParseCache<T> {
  get(text: string): T | undefined;
  set(text: string, value: T): void;
}

interface ParseCaches {
  readonly documentCache: ParseCache<DocumentNode>;
  readonly errorCache: ParseCache<unknown>;
}

function tokensOf(document: DocumentNode): number {
  let count = 0;
  for (let token = document.loc?.startToken; token; token = token.next ?? undefined) count++;
  return count;
}

/** Estimated heap of one cached parse: the text (two bytes a character at most) and what parsing made of it. */
function parseBytes(parsed: DocumentNode | Error, text: string): number {
  return 2 * text.length + (parsed instanceof Error ? BYTES_PER_ERROR : BYTES_PER_TOKEN * Math.max(1, tokensOf(parsed)));
}

/**
 * yoga's parse cache, bounded by count and by bytes: by default it keeps 1,024 documents whatever
 * their size, and a document within MAX_TOKENS may hold a megabyte of AST. Everything else kept
 * per document (yoga's validation result, the plan, the limit checks, compiled execution's count
 * of runs) lives in WeakMaps keyed by these DocumentNodes, so it goes when they do. Parsed documents and syntax
 * errors share one budget: yoga asks its two caches by the same text.
 */
export function boundedParseCache(limits: CacheBounds): { caches: ParseCaches; use: () => CacheUse } {
  const parsed = new LRUCache<string, DocumentNode | Error>({ max: limits.maxEntries, maxSize: limits.maxBytes, sizeCalculation: parseBytes });
  const caches: ParseCaches = {
    documentCache: {
      get: (text) => {
        const entry = parsed.get(text);
        return entry instanceof Error ? undefined : entry;
      },
      set: (text, document) => void parsed.set(text, document),
    },
    errorCache: {
      get: (text) => {
        const entry = parsed.get(text);
        return entry instanceof Error ? entry : undefined;
      },
      // yoga hands it only Errors.
      set: (text, error) => {
        if (error instanceof Error) parsed.set(text, error);
      },
    },
  };
  return { caches, use: () => ({ entries: parsed.size, bytes: parsed.calculatedSize }) };
}

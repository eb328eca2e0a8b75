import { readFileSync } from 'node:fs';
import { z } from 'zod';

/*
 * The manifest TRUSTED_DOCUMENTS_FILE names, read and checked with the rest of the configuration
 * (config.ts): a manifest that cannot be read stops the start, as a bad variable does.
 */

/**
 * The trusted documents: document id -> document text. The manifest is what codegen's client
 * preset writes (`src/generated/persisted-documents.json`, ids `sha256:<hex>` of the text), or
 * any JSON object of the same shape (relay-compiler's persisted queries file is one).
 */
export type TrustedDocuments = ReadonlyMap<string, string>;

export class TrustedDocumentsError extends Error {
  override name = 'TrustedDocumentsError';
}

/** GraphQL over HTTP (Persisted Documents appendix) prefixes a SHA-256 document id with this. */
const SHA256_PREFIX = 'sha256:';

const manifest = z.record(z.string().min(1), z.string().min(1));

/**
 * Reads a manifest. An id `sha256:<hex>` also answers to the bare `<hex>`, which is what Apollo's
 * `extensions.persistedQuery.sha256Hash` carries.
 */
export function loadTrustedDocuments(file: string): TrustedDocuments {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new TrustedDocumentsError(`cannot read a JSON object from ${file} (${(error as Error).message})`);
  }
  const parsed = manifest.safeParse(json);
  if (!parsed.success || Object.keys(parsed.data).length === 0) {
    throw new TrustedDocumentsError(`expected a JSON object of document ids to GraphQL documents in ${file}`);
  }
  const documents = new Map<string, string>();
  for (const [id, text] of Object.entries(parsed.data)) {
    documents.set(id, text);
    if (id.startsWith(SHA256_PREFIX)) documents.set(id.slice(SHA256_PREFIX.length), text);
  }
  return documents;
}

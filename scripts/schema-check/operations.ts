import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  parse,
  validate,
} from 'graphql';
import { loadTrustedDocuments } from '../../src/config/trusted-documents.js';
import { fragmentsOf, fragmentsSpreadBy, selectedCoordinates } from '../../src/server/documents/coordinates.js';

/*
 * The operations clients use, as the check reads them: the trusted-documents manifest (the
 * operations the apps ship; the gateway's reader, src/config/trusted-documents.ts, so any manifest
 * TRUSTED_DOCUMENTS_FILE takes is read the same way), and any further manifest or folder of
 * `.graphql` files an operator names. Each operation is judged against both schemas with
 * graphql-js: valid or not (validate), and which coordinates it selects (the gateway's own
 * function, src/server/documents/coordinates.ts).
 */

/** One operation a client uses, and where it was found. */
export interface KnownOperation {
  /** Its name ('anonymous' for none). */
  readonly name: string;
  /** Where it is: a `.graphql` file, or a manifest and the operation's id in it. */
  readonly file: string;
  /** The operation with the fragments it spreads: a document of its own. */
  readonly document: DocumentNode;
}

/** `text` parsed, or an error naming where it came from. */
function parsed(text: string, where: string): DocumentNode {
  try {
    return parse(text, { noLocation: true });
  } catch (error) {
    throw new Error(`${where}: ${(error as Error).message}`);
  }
}

/** The operations of one parsed text, each with the fragments of `fragments` it spreads: a document of its own. */
function operationsOf(
  document: DocumentNode,
  file: string,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
): KnownOperation[] {
  return document.definitions
    .filter((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION)
    .map((definition) => ({
      name: definition.name?.value ?? 'anonymous',
      file,
      document: { kind: Kind.DOCUMENT, definitions: [definition, ...fragmentsSpreadBy(definition, fragments)] },
    }));
}

/**
 * A manifest (JSON object of id → document, codegen's or relay-compiler's): each document on its own, named by `file`
 * and its id.
 */
function manifestOperations(file: string, shown: string): KnownOperation[] {
  const operations: KnownOperation[] = [];
  const seen = new Set<string>();
  // The reader answers a `sha256:` id under its bare hex too: each text once, under its first id.
  for (const [id, text] of loadTrustedDocuments(file)) {
    if (seen.has(text)) continue;
    seen.add(text);
    const where = `${shown} ${id.length > 20 ? `${id.slice(0, 19)}…` : id}`;
    const document = parsed(text, where);
    operations.push(...operationsOf(document, where, fragmentsOf(document)));
  }
  return operations;
}

/**
 * `.graphql` and `.gql` files under `path` (or `path` itself): their operations, fragments shared across the files as
 * codegen shares them.
 */
function folderOperations(path: string, root: string): KnownOperation[] {
  const files = statSync(path).isDirectory()
    ? readdirSync(path, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile() && /\.(graphql|gql)$/.test(entry.name))
        .map((entry) => join(entry.parentPath, entry.name))
        .sort()
    : [path];
  const documents = files.map((file) => ({ file, document: parsed(readFileSync(file, 'utf8'), relative(root, file)) }));
  const fragments = new Map(documents.flatMap(({ document }) => [...fragmentsOf(document)]));
  return documents.flatMap(({ file, document }) => operationsOf(document, relative(root, file), fragments));
}

/** The operations in `path`: a manifest (`.json`), a `.graphql` file or a folder of them. */
export function loadOperations(path: string, root: string): KnownOperation[] {
  return path.endsWith('.json') ? manifestOperations(path, relative(root, path)) : folderOperations(path, root);
}

/** An operation as judged against the two schemas. */
export interface JudgedOperation {
  readonly operation: KnownOperation;
  /** The coordinates it selects, in either schema. */
  readonly selects: ReadonlySet<string>;
  /** Its validation errors against the base schema: an operation already invalid there is not the change's doing. */
  readonly invalidBefore: readonly string[];
  /** Its validation errors against the new schema. */
  readonly invalidAfter: readonly string[];
}

const operationOf = (document: DocumentNode) => document.definitions[0] as OperationDefinitionNode;
const coordinatesIn = (schema: GraphQLSchema, document: DocumentNode) =>
  selectedCoordinates(schema, document, operationOf(document)).coordinates;

/**
 * graphql-js's validation, and what it leaves to execution: a schema without the operation's root type (no
 * Subscription) cannot run it.
 */
function validationErrors(schema: GraphQLSchema, document: DocumentNode): string[] {
  const { operation } = operationOf(document);
  if (schema.getRootType(operation) === undefined) return [`The schema has no ${operation} type.`];
  return validate(schema, document).map((error) => error.message);
}

/** Each operation validated against both schemas, with the coordinates it selects in either. */
export function judgeOperations(
  operations: readonly KnownOperation[],
  base: GraphQLSchema,
  next: GraphQLSchema,
): JudgedOperation[] {
  return operations.map((operation) => ({
    operation,
    selects: new Set([...coordinatesIn(base, operation.document), ...coordinatesIn(next, operation.document)]),
    invalidBefore: validationErrors(base, operation.document),
    invalidAfter: validationErrors(next, operation.document),
  }));
}

import type { CodegenConfig } from '@graphql-codegen/cli';

/**
 * `npm run codegen`: typed documents (TypedDocumentNode) for the example operations in
 * operations/*.graphql, generated into src/generated/ with the client preset.
 *
 * - The schema is read from schema.graphql (written by `npm run schema`), not from the Pothos
 *   code: codegen then needs no TypeScript loader, and CI can diff both artifacts.
 * - importExtension '.js': under NodeNext the generated relative imports need the extension.
 * - useTypeImports: verbatimModuleSyntax wants `import type` for type-only imports.
 * - persistedDocuments: also writes src/generated/persisted-documents.json, the trusted documents
 *   manifest (`sha256:<hex>` -> document text) the gateway loads from TRUSTED_DOCUMENTS_FILE; every
 *   typed document carries its id in `__meta__.hash` for clients to send.
 */
const config: CodegenConfig = {
  overwrite: true,
  schema: 'schema.graphql',
  documents: ['operations/*.graphql'],
  ignoreNoDocuments: false,
  generates: {
    'src/generated/': {
      preset: 'client',
      presetConfig: {
        fragmentMasking: false,
        persistedDocuments: { mode: 'embedHashInDocument', hashAlgorithm: 'sha256' },
      },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        importExtension: '.js',
        // The custom scalars as the gateway serializes them (JSON: any JSON value).
        scalars: {
          UUID: 'string',
          DateTime: 'string',
          URL: 'string',
          JSON: 'unknown',
        },
      },
    },
  },
};

export default config;

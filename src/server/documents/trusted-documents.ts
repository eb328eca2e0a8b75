import { Kind, parse } from 'graphql';
import type { TrustedDocuments } from '../../config.js';

/** The operation names the manifest (config/trusted-documents.ts) defines: the names /metrics keeps apart. */
export function operationNamesOf(documents: TrustedDocuments): Set<string> {
  const names = new Set<string>();
  for (const text of new Set(documents.values())) {
    try {
      for (const definition of parse(text, { noLocation: true }).definitions)
        if (definition.kind === Kind.OPERATION_DEFINITION && definition.name) names.add(definition.name.value);
    } catch {
      // A document that does not parse defines no name; running it fails as it would anyway.
    }
  }
  return names;
}

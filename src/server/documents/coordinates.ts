import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  Kind,
  type OperationDefinitionNode,
  TypeInfo,
  visit,
  visitWithTypeInfo,
} from 'graphql';

// Shared by the gateway's count (documents/coordinate-usage.ts) and `npm run schema:check`: both mean the same "uses".

/** What an operation selects: every coordinate once, sorted, and those of them the schema marks `@deprecated`. */
export interface SelectedCoordinates {
  readonly coordinates: readonly string[];
  readonly deprecated: readonly string[];
}

/** The fragments `operation` spreads, directly or through other fragments, of those `defined` (by name). */
export function fragmentsSpreadBy(
  operation: OperationDefinitionNode,
  defined: ReadonlyMap<string, FragmentDefinitionNode>,
): FragmentDefinitionNode[] {
  const reached = new Map<string, FragmentDefinitionNode>();
  const walk = (node: OperationDefinitionNode | FragmentDefinitionNode): void => {
    visit(node, {
      FragmentSpread(spread) {
        const name = spread.name.value;
        const fragment = defined.get(name);
        if (fragment === undefined || reached.has(name)) return;
        reached.set(name, fragment);
        walk(fragment);
      },
    });
  };
  walk(operation);
  return [...reached.values()];
}

export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = document.definitions.filter((definition) => definition.kind === Kind.FRAGMENT_DEFINITION);
  return new Map(fragments.map((fragment) => [fragment.name.value, fragment]));
}

/**
 * What `operation` selects with its fragments: fields, arguments, literal input fields and enum values, directives; not
 * meta fields (`__typename`, …), nor what a variable holds (an argument given through one counts alone).
 */
export function selectedCoordinates(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): SelectedCoordinates {
  const coordinates = new Set<string>();
  const deprecated = new Set<string>();
  const add = (coordinate: string, deprecationReason: string | null | undefined) => {
    coordinates.add(coordinate);
    if (deprecationReason != null) deprecated.add(coordinate);
  };
  const typeInfo = new TypeInfo(schema);
  visit(
    { kind: Kind.DOCUMENT, definitions: [operation, ...fragmentsSpreadBy(operation, fragmentsOf(document))] },
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        const parent = typeInfo.getParentType();
        const field = typeInfo.getFieldDef();
        if (parent != null && field != null && !node.name.value.startsWith('__'))
          add(`${parent.name}.${field.name}`, field.deprecationReason);
      },
      Argument() {
        const argument = typeInfo.getArgument();
        const field = typeInfo.getFieldDef();
        const parent = typeInfo.getParentType();
        // A directive's argument is the directive's (`@defer(label:)`): the directive is counted.
        if (argument == null || typeInfo.getDirective() != null || field == null || parent == null) return;
        add(`${parent.name}.${field.name}(${argument.name}:)`, argument.deprecationReason);
      },
      ObjectField(node) {
        const object = getNamedType(typeInfo.getParentInputType());
        if (!isInputObjectType(object)) return;
        const field = object.getFields()[node.name.value];
        if (field !== undefined) add(`${object.name}.${field.name}`, field.deprecationReason);
      },
      EnumValue() {
        const value = typeInfo.getEnumValue();
        const type = getNamedType(typeInfo.getInputType());
        if (value != null && isEnumType(type)) add(`${type.name}.${value.name}`, value.deprecationReason);
      },
      Directive() {
        const directive = typeInfo.getDirective();
        if (directive != null) add(`@${directive.name}`, undefined);
      },
    }),
  );
  return { coordinates: [...coordinates].sort(), deprecated: [...deprecated].sort() };
}

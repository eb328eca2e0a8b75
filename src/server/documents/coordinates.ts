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

/*
 * Which schema coordinates (the GraphQL spec's RFC: `Type.field`, `Type.field(arg:)`,
 * `Input.field`, `Enum.VALUE`, `@directive`) an operation selects: one pure function of a
 * document, read with graphql-js's TypeInfo. The gateway counts them per client
 * (documents/coordinate-usage.ts: once per document, kept beside it) and `npm run schema:check`
 * matches a schema's changes against the operations clients use with the same function, so the
 * counter and the check agree on what "uses" means.
 */

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

/** A document's fragments by name. */
export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const defined = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) defined.set(definition.name.value, definition);
  return defined;
}

/**
 * The coordinates `operation` of `document` selects against `schema`, its fragments' included:
 * fields and the arguments given to them, the input fields and enum values written as literals,
 * and the directives used. Introspection's meta fields (`__typename`, …) are not coordinates of
 * the schema. What a variable's value holds is not in the document, so not here: an argument
 * given through a variable counts as that argument.
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
  const selected: DocumentNode = {
    kind: Kind.DOCUMENT,
    definitions: [operation, ...fragmentsSpreadBy(operation, fragmentsOf(document))],
  };
  visit(
    selected,
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
        const input = typeInfo.getParentInputType();
        const object = input == null ? undefined : getNamedType(input);
        if (!isInputObjectType(object)) return;
        const field = object.getFields()[node.name.value];
        if (field !== undefined) add(`${object.name}.${field.name}`, field.deprecationReason);
      },
      EnumValue() {
        const value = typeInfo.getEnumValue();
        const input = typeInfo.getInputType();
        const type = input == null ? undefined : getNamedType(input);
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

import {
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isObjectType,
} from 'graphql';

/** One member coordinate of a schema: a field, a field's argument, an input field or an enum value. */
export interface MemberCoordinate {
  readonly coordinate: string;
  /** The named type it belongs to (`Head` of `Head.name` and of `Head.url(size:)`). */
  readonly parent: GraphQLNamedType;
  /** The named type of its value (none for an enum value). */
  readonly type: GraphQLNamedType | undefined;
  /** Its `@deprecated(reason:)`, if it has one. */
  readonly deprecationReason: string | undefined;
}

/** Every member coordinate of `schema` (introspection's types left out), type by type. */
export function memberCoordinates(schema: GraphQLSchema): MemberCoordinate[] {
  const members: MemberCoordinate[] = [];
  const add = (
    coordinate: string,
    parent: GraphQLNamedType,
    type: GraphQLNamedType | undefined,
    reason: string | null | undefined,
  ) => members.push({ coordinate, parent, type, deprecationReason: reason ?? undefined });
  for (const type of Object.values(schema.getTypeMap())) {
    if (isIntrospectionType(type)) continue;
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        add(`${type.name}.${field.name}`, type, getNamedType(field.type), field.deprecationReason);
        for (const arg of field.args)
          add(`${type.name}.${field.name}(${arg.name}:)`, type, getNamedType(arg.type), arg.deprecationReason);
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields()))
        add(`${type.name}.${field.name}`, type, getNamedType(field.type), field.deprecationReason);
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) add(`${type.name}.${value.name}`, type, undefined, value.deprecationReason);
    }
  }
  return members;
}

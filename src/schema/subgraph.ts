import { MapperKind, mapSchema, printSchemaWithDirectives, pruneSchema } from '@graphql-tools/utils';
import {
  type GraphQLFieldConfig,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  isObjectType,
  isSpecifiedDirective,
  valueFromASTUntyped,
} from 'graphql';
import { entityIdsFrom } from '../domain/ids.js';
import { items, typeFactsOf } from '../plan/facts.js';
import type { GatewayContext } from './context.js';
import { headOrGone } from './head.js';
import { schema } from './index.js';
import { invalidInput } from './inputs.js';

/*
 * The schema a federation router composes (Apollo Federation v2): the public one without what a subgraph does not
 * serve (subscriptions, @live, @defer and @stream), each type a supergraph may reference marked `@key` by the field it
 * declares (`entity(...)`: Head by its UUID), and the subgraph fields: `_service { sdl }` and `_entities`, whose heads
 * the plan reads ahead as `nodes(ids:)`'s. Built from the public schema, so every field and resolver is the same.
 */

/** The Federation spec linked, and what of it the SDL uses. */
const FEDERATION = { url: 'https://specs.apollo.dev/federation/v2.3', import: ['@key'] };

/** The public schema as a subgraph serves it: no subscriptions, no directives beyond GraphQL's own; entities keyed. */
const core = pruneSchema(
  mapSchema(schema, {
    [MapperKind.SUBSCRIPTION]: () => null,
    [MapperKind.DIRECTIVE]: (directive) => (isSpecifiedDirective(directive) ? directive : null),
    [MapperKind.OBJECT_TYPE]: (type) => {
      const key = typeFactsOf(type).entityKey;
      if (key === undefined) return type;
      const config = type.toConfig();
      return new GraphQLObjectType({
        ...config,
        extensions: { ...config.extensions, directives: { key: [{ fields: key }] } },
      });
    },
  }),
);

/** The SDL a router composes: the subgraph's own types, `@link`ed to Federation (what `_service { sdl }` answers). */
export const subgraphSdl = printSchemaWithDirectives(
  new GraphQLSchema({ ...core.toConfig(), extensions: { directives: { link: [FEDERATION] } } }),
);

const entities = Object.values(core.getTypeMap()).filter(
  (type): type is GraphQLObjectType => isObjectType(type) && typeFactsOf(type).entityKey !== undefined,
);
const [head] = entities;
if (head === undefined || entities.length !== 1) throw new Error('The subgraph resolves one entity type: Head');
const headKey = typeFactsOf(head).entityKey!;

/** Any representation a router sends, as it is: `_entities` checks them itself. */
const AnyScalar = new GraphQLScalarType({
  name: '_Any',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});

const EntityUnion = new GraphQLUnionType({ name: '_Entity', types: entities });

const ServiceType = new GraphQLObjectType({
  name: '_Service',
  fields: { sdl: { type: new GraphQLNonNull(GraphQLString) } },
});

/**
 * The heads the representations name, in order: one that does not exist is null with no error; a representation
 * that is not `{ __typename: "Head", uuid }` refuses the field (BAD_USER_INPUT) before any read.
 */
const entitiesField: GraphQLFieldConfig<unknown, GatewayContext, { representations: unknown }> = {
  type: new GraphQLNonNull(new GraphQLList(EntityUnion)),
  args: { representations: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(AnyScalar))) } },
  ...items({ arg: 'representations' }, { kind: 'entities', arg: 'representations', typename: head.name, key: headKey }),
  resolve: (_, args, context) => {
    const ids = entityIdsFrom(args.representations, head.name, headKey);
    if (!Array.isArray(ids))
      throw invalidInput([
        {
          message: `Expected { __typename: "${head.name}", ${headKey}: <UUID> }`,
          path: ['representations', ids.index],
          params: { type: 'invalid_representation' },
        },
      ]);
    // An item's failure is its value, never a rejection (graphql-jit would move a rejected item's null to the end).
    return ids.map((id) => headOrGone(context, id).catch((error: unknown) => error));
  },
};

const query = core.getQueryType()!.toConfig();

/** The subgraph schema: `/graphql`'s fields and resolvers, with `_entities` and `_service` for the router. */
export const subgraphSchema = new GraphQLSchema({
  ...core.toConfig(),
  query: new GraphQLObjectType({
    ...query,
    fields: {
      _entities: entitiesField as GraphQLFieldConfig<unknown, unknown>,
      _service: { type: new GraphQLNonNull(ServiceType), resolve: () => ({ sdl: subgraphSdl }) },
      ...query.fields,
    },
  }),
  types: core
    .toConfig()
    .types.filter((type) => type.name !== query.name)
    .concat(EntityUnion),
});

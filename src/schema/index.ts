import { GraphQLDeferDirective, GraphQLStreamDirective } from '@graphql-tools/utils';
import { DirectiveLocation, GraphQLDirective, GraphQLSchema } from 'graphql';
import { builder } from './builder.js';
import './enums.js';
import './hair.js';
import './head.js';
import './node.js';
import './head-mutations.js';
import './head-changes.js';
import './permission.js';
import './subscription.js';
import './login.js';

const built = builder.toSchema({ sortSchema: false });

/**
 * The schema, with the incremental delivery directives (@defer, @stream) and @live declared in it, so that
 * schema.graphql states them for clients and their compilers (relay-compiler refuses @defer
 * against a schema without it). graphql-tools' executor serves them, with the validation rules of
 * yoga's defer-stream plugin (server/documents/incremental-delivery.ts).
 */
/**
 * A live query: answered as a stream, whose first result is the query's and each next one sent as a head it read
 * changes (server/real-time/live-queries.ts).
 */
const GraphQLLiveDirective = new GraphQLDirective({
  name: 'live',
  description:
    'Makes a query live: it is answered as a stream (SSE, multipart or WebSocket, as a subscription is), its first result at once, then the whole result again whenever a head it read changes (through any replica, or found by polling), at most once a `SUBSCRIPTION_LIVE_THROTTLE_MS`. A live `heads(first:)` is a list view that stays current.',
  locations: [DirectiveLocation.QUERY],
});

export const schema = new GraphQLSchema({
  ...built.toConfig(),
  directives: [...built.getDirectives(), GraphQLDeferDirective, GraphQLStreamDirective, GraphQLLiveDirective],
});

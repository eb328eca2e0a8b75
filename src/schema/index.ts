import { GraphQLDeferDirective, GraphQLStreamDirective } from '@graphql-tools/utils';
import { GraphQLSchema } from 'graphql';
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
 * The schema, with the incremental delivery directives (@defer, @stream) declared in it, so that
 * schema.graphql states them for clients and their compilers (relay-compiler refuses @defer
 * against a schema without it). graphql-tools' executor serves them, with the validation rules of
 * yoga's defer-stream plugin (server/documents/incremental-delivery.ts).
 */
export const schema = new GraphQLSchema({ ...built.toConfig(), directives: [...built.getDirectives(), GraphQLDeferDirective, GraphQLStreamDirective] });

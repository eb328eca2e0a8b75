import { type OperationDefinitionNode, parse } from 'graphql';
import { OperationState } from '../../src/server/operation-state.js';
import { Pipeline, type PipelineOptions } from '../../src/server/pipeline/pipeline.js';
import type { Policy, Serve } from '../../src/server/pipeline/stages.js';
import { routes } from '../../src/server/routes.js';

/**
 * A policy that makes each request's one operation of `query` (what intake/params.ts does) and prepares its document
 * (what documents/prepared.ts does, without the validation): the stages after the document stage are given it.
 */
export function oneOperation(query: string): Policy {
  const document = parse(query);
  const definition = document.definitions[0] as OperationDefinitionNode;
  return {
    name: 'one operation',
    intake: (request) => void new OperationState({ query }, request),
    document: (operation) => {
      operation.prepared = { text: query, document, incremental: false, plain: document };
      operation.document = document;
      operation.definition = definition;
      return undefined;
    },
  };
}

/** The one path of `policies`, served at /graphql as the gateway's routes serve it (no GraphiQL, no other route). */
export function serveOf(options: PipelineOptions): Serve {
  return routes({
    endpoint: '/graphql',
    pipeline: new Pipeline(options),
    callers: { trustProxy: undefined, callerOf: () => undefined },
    graphiql: undefined,
    preflight: undefined,
    routes: [],
    everyAnswer: [],
  });
}

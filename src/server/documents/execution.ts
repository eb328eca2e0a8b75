import { type Plugin as EnvelopPlugin, envelop, type GetEnvelopedFn, useEngine, useSchema } from '@envelop/core';
import { execute as executeEvent, normalizedExecutor } from '@graphql-tools/executor';
import { type ExecutionArgs, type GraphQLSchema, parse, specifiedRules, validate } from 'graphql';
import type { PromiseOrValue } from 'graphql-yoga';
import type { OperationState } from '../operation-state.js';
import type { ExecutionStep, Policy } from '../pipeline/stages.js';
import type { OperationResult } from '../request-state.js';
import type { CompiledExecution } from './compiled-execution.js';

export interface GatewayEnvelopOptions {
  readonly schema: GraphQLSchema;
  /** Compiled execution (COMPILED_EXECUTION=on): hot queries run by their compiled code. */
  readonly compiled?: CompiledExecution | undefined;
  /**
   * The policies that live as envelop plugins: those of documents (`onParse`, `onValidate`: run as
   * a text is prepared, documents/prepared.ts) and those that wrap execution (`onExecute`: the
   * response cache's, which runs a document of its own and keeps what it answers).
   */
  readonly plugins: readonly EnvelopPlugin[];
}

export interface GatewayEnvelop {
  readonly getEnveloped: GetEnvelopedFn<unknown>;
  /** Runs an operation on its context: what the execution policy and a live query's first result use. */
  readonly execute: (operation: OperationState) => PromiseOrValue<OperationResult>;
  /**
   * The execution stage's last policy: every operation no policy before it took (a client's, and a subscription's
   * events).
   */
  readonly policy: Policy;
}

/**
 * The gateway's envelop: the engine (graphql-js's parser and validator; for execution, an
 * operation's compiled code when it has one, else graphql-tools' executor, which serves @defer
 * and @stream), the schema, and the policies that live as envelop plugins. Its `policy` is the
 * execution stage's last: an operation without a result yet, run on its context (made as it was
 * planned) with its request's signal, so a client that hangs up stops what is left of it (the
 * executor checks the signal between fields; its upstream calls are cancelled through the
 * context); a subscription's event runs its subscription's selection on the change (graphql-js's
 * "map source to response event"). Without a plugin that wraps execution it calls the engine
 * directly.
 */
export function gatewayEnvelop(options: GatewayEnvelopOptions): GatewayEnvelop {
  const { compiled, schema } = options;
  const execute = (args: ExecutionArgs): PromiseOrValue<OperationResult> =>
    compiled?.run(args) ?? (normalizedExecutor(args) as PromiseOrValue<OperationResult>);
  const getEnveloped = envelop({
    plugins: [
      useEngine({ parse, validate, specifiedRules, execute, subscribe: normalizedExecutor }),
      useSchema(schema),
      ...options.plugins,
    ],
  });
  const wrapped = options.plugins.some((plugin) => plugin.onExecute !== undefined);
  const run = (operation: OperationState): PromiseOrValue<OperationResult> => {
    const contextValue = operation.context!;
    const { event } = operation;
    const args = {
      schema,
      document: operation.document!,
      // A subscription's event (or a live query's): its change.
      rootValue: event?.change,
      contextValue,
      variableValues: operation.params.variables ?? undefined,
      operationName: operation.params.operationName ?? undefined,
      signal: operation.request.signal,
    } as ExecutionArgs;
    // A subscription's event: its selection run on the change, as graphql-js maps a source event to a response (no
    // plugin wraps it: nothing of it is kept).
    if (event !== undefined && operation.definition?.operation === 'subscription')
      return executeEvent(args) as PromiseOrValue<OperationResult>;
    return (wrapped ? getEnveloped(contextValue).execute(args) : execute(args)) as PromiseOrValue<OperationResult>;
  };
  const step: ExecutionStep = run;
  return { getEnveloped, execute: run, policy: { name: 'execution', concerns: 'also events', execution: step } };
}

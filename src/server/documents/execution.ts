import { type Plugin as EnvelopPlugin, envelop, type GetEnvelopedFn, useEngine, useSchema } from '@envelop/core';
import { execute as executeEvent, normalizedExecutor } from '@graphql-tools/executor';
import { type ExecutionArgs, type GraphQLSchema, parse, specifiedRules, validate } from 'graphql';
import type { PromiseOrValue } from 'graphql-yoga';
import type { PreparedOperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { OperationResult } from '../request-state.js';
import type { CompiledExecution } from './compiled-execution.js';

export interface GatewayEnvelopOptions {
  readonly schema: GraphQLSchema;
  /** Compiled execution (COMPILED_EXECUTION=on): hot queries run by their compiled code. */
  readonly compiled?: CompiledExecution;
  /** Policies as envelop plugins: documents' (`onValidate`, documents/prepared.ts) and the response cache's. */
  readonly plugins: readonly EnvelopPlugin[];
}

export interface GatewayEnvelop {
  readonly getEnveloped: GetEnvelopedFn<unknown>;
  /** Runs an operation on its context: the execution policy's and a live query's first result. */
  readonly execute: (operation: PreparedOperationState) => PromiseOrValue<OperationResult>;
  /** The execution stage's last policy: every operation (or subscription event) no policy before it took. */
  readonly policy: Policy;
}

/** The envelop; its `policy` runs an operation with its request's signal, so a client that hangs up stops the rest. */
export function gatewayEnvelop(options: GatewayEnvelopOptions): GatewayEnvelop {
  const { compiled, schema } = options;
  const execute = (args: ExecutionArgs): PromiseOrValue<OperationResult> =>
    compiled?.run(args) ?? (normalizedExecutor(args) as PromiseOrValue<OperationResult>);
  const engine = useEngine({ parse, validate, specifiedRules, execute, subscribe: normalizedExecutor });
  const getEnveloped = envelop({ plugins: [engine, useSchema(schema), ...options.plugins] });
  const wrapped = options.plugins.some((plugin) => plugin.onExecute !== undefined);
  const run = (operation: PreparedOperationState): PromiseOrValue<OperationResult> => {
    const { event, context: contextValue } = operation;
    const args = {
      schema,
      document: operation.document,
      rootValue: event?.change,
      contextValue,
      variableValues: operation.params.variables ?? undefined,
      operationName: operation.params.operationName ?? undefined,
      signal: operation.request.signal,
    } as ExecutionArgs;
    // An event runs on its change; a subscription's as graphql-js maps a source event, no plugin (nothing is kept).
    if (event !== undefined && operation.definition?.operation === 'subscription')
      return executeEvent(args) as PromiseOrValue<OperationResult>;
    return (wrapped ? getEnveloped(contextValue).execute(args) : execute(args)) as PromiseOrValue<OperationResult>;
  };
  return { getEnveloped, execute: run, policy: { name: 'execution', concerns: 'also events', execution: run } };
}

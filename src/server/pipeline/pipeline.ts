import { GraphQLError } from 'graphql';
import type { OperationState, RequestState } from '../request-state.js';
import { stageNames, type Answer, type AnswerStep, type Executor, type IntakeStep, type MaybePromise, type OperationStep, type OperationVerdict, type RequestVerdict, type ResultStep, type Stages, type Steps, type TelemetryStep } from './stages.js';

/** A step's promise: only a step that waits (Redis, an upstream call) makes one; the others run in the same turn. */
const isPromise = <T>(value: MaybePromise<T>): value is Promise<T> => value instanceof Promise;

/** Then `next`, at once when `value` is no promise. */
function then<T, U>(value: MaybePromise<T>, next: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return isPromise(value) ? value.then(next) : next(value);
}

/**
 * Runs `steps` on `subject` in order, from `from`, until one gives a verdict (or throws one):
 * synchronously while the steps are, so a request that waits on nothing makes no promise.
 */
function runSteps<S, V>(steps: readonly ((subject: S) => MaybePromise<V | void>)[], subject: S, refusal: (error: unknown) => V, from = 0): MaybePromise<V | undefined> {
  for (let i = from; i < steps.length; i++) {
    let verdict: MaybePromise<V | void>;
    try {
      verdict = steps[i]!(subject);
    } catch (error) {
      return refusal(error);
    }
    if (isPromise(verdict)) return verdict.then((settled) => (settled === undefined ? runSteps(steps, subject, refusal, i + 1) : settled), refusal);
    if (verdict !== undefined) return verdict;
  }
  return undefined;
}

/** Runs steps that give no verdict, in order, waiting for each that waits. */
function runAll<S>(steps: readonly ((subject: S) => MaybePromise<void>)[], subject: S, from = 0): MaybePromise<void> {
  for (let i = from; i < steps.length; i++) {
    const done = steps[i]!(subject);
    if (isPromise(done)) return done.then(() => runAll(steps, subject, i + 1));
  }
  return undefined;
}

/** An operation refused by a step: its refusal is its result. */
function refuse(operation: OperationState, refusal: OperationVerdict): void {
  if (refusal !== undefined) operation.result = { errors: refusal instanceof GraphQLError ? [refusal] : refusal };
}

/** The steps that are set, in order. */
const listed = <T>(steps: Steps<T>): T[] => Object.values(steps).filter((step): step is T => step !== undefined);

/** The names of the steps that are set, in order. */
const named = (steps: Steps<unknown>): string[] => Object.entries(steps).flatMap(([name, step]) => (step === undefined ? [] : [name]));

export interface PipelineOptions {
  readonly stages: Stages;
  /**
   * The one masking of errors (answers/masking.ts): a step that throws anything but a GraphQL
   * error is answered with what this makes of it.
   */
  readonly mask: (error: unknown) => GraphQLError;
}

/**
 * The one path of a GraphQL request, whatever its transport: its stages in order (stages.ts),
 * each step run for every request the stage concerns. A transport makes the request's state,
 * `run`s it to its answer, sends that, and once it is out (or the client is gone) calls `finish`
 * for the telemetry stage.
 */
export class Pipeline {
  readonly #intake: readonly IntakeStep[];
  readonly #operations: readonly (readonly OperationStep[])[];
  readonly #executor: Executor;
  readonly #result: readonly ResultStep[];
  readonly #answer: readonly AnswerStep[];
  readonly #telemetry: readonly TelemetryStep[];
  readonly #refusal: (error: unknown) => GraphQLError;
  /** Each stage's steps by name, in order: what docs/architecture.md draws and a test holds. */
  readonly stages: Readonly<Record<(typeof stageNames)[number], readonly string[]>>;

  constructor(options: PipelineOptions) {
    const { stages, mask } = options;
    this.#intake = listed(stages.intake);
    this.#operations = [listed(stages.document), listed(stages.admission), listed(stages.plan)];
    this.#executor = stages.execution.executor;
    this.#result = listed(stages.execution.result);
    this.#answer = listed(stages.answer);
    this.#telemetry = listed(stages.telemetry);
    this.#refusal = (error) => (error instanceof GraphQLError ? error : mask(error));
    const { execution, ...rest } = stages;
    this.stages = Object.freeze(Object.fromEntries(stageNames.map((stage) => [stage, stage === 'execution' ? ['executor', ...named(execution.result)] : named(rest[stage])]))) as unknown as Pipeline['stages'];
  }

  /** The request's answer, made by the answer stage once every operation has its result. */
  run(request: RequestState): MaybePromise<Answer> {
    const intake = runSteps<RequestState, RequestVerdict>(this.#intake, request, this.#refusal);
    return then(intake, (refusal) => {
      if (refusal !== undefined) {
        request.refusal = refusal;
        return this.#answered(request);
      }
      const { operations } = request;
      const ran = operations.length === 1 ? this.#operation(operations[0]!) : Promise.all(operations.map((operation) => this.#operation(operation))).then(() => undefined);
      return then(ran, () => this.#answered(request));
    });
  }

  /** The telemetry stage, once the answer is out: its transport calls it once. */
  finish(request: RequestState, answer: Answer): void {
    for (const step of this.#telemetry) step(request, answer);
  }

  /**
   * One operation through the document, admission and plan stages, then execution: each stage
   * after the document concerns the operations without a result yet (not refused, not answered),
   * and the execution's result steps every operation, whatever gave it its result.
   */
  #operation(operation: OperationState, from = 0): MaybePromise<void> {
    for (let stage = from; stage < this.#operations.length && operation.result === undefined; stage++) {
      const verdict = runSteps<OperationState, OperationVerdict>(this.#operations[stage]!, operation, this.#refusal);
      if (isPromise(verdict)) {
        return verdict.then((refusal) => {
          refuse(operation, refusal);
          return this.#operation(operation, stage + 1);
        });
      }
      refuse(operation, verdict);
    }
    const executed = operation.result === undefined ? this.#execute(operation) : undefined;
    return isPromise(executed) ? executed.then(() => runAll(this.#result, operation)) : runAll(this.#result, operation);
  }

  #execute(operation: OperationState): MaybePromise<void> {
    let result;
    try {
      result = this.#executor(operation);
    } catch (error) {
      operation.result = { errors: [this.#refusal(error)] };
      return undefined;
    }
    return isPromise(result)
      ? result.then(
          (done) => void (operation.result = done),
          (error: unknown) => void (operation.result = { errors: [this.#refusal(error)] }),
        )
      : void (operation.result = result);
  }

  #answered(request: RequestState, answer: Answer = { status: 200, headers: new Map(), body: null }, from = 0): MaybePromise<Answer> {
    const steps = this.#answer;
    for (let i = from; i < steps.length; i++) {
      const done = steps[i]!(request, answer);
      if (isPromise(done)) return done.then(() => this.#answered(request, answer, i + 1));
    }
    return answer;
  }
}

import { GraphQLError } from 'graphql';
import type { OperationState, RequestState } from '../request-state.js';
import type { Answer, IntakeStep, MaybePromise, OperationStep, OperationVerdict, RequestVerdict, ResultStep, Stages } from './stages.js';

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
  readonly #stages: Stages;
  readonly #refusal: (error: unknown) => GraphQLError;

  constructor(options: PipelineOptions) {
    this.#stages = options.stages;
    const { mask } = options;
    this.#refusal = (error) => (error instanceof GraphQLError ? error : mask(error));
  }

  /** The request's answer, made by the answer stage once every operation has its result. */
  run(request: RequestState): MaybePromise<Answer> {
    const intake = runSteps<RequestState, RequestVerdict>(this.#stages.intake as readonly IntakeStep[], request, this.#refusal);
    return then(intake, (refusal) => {
      if (refusal !== undefined) {
        request.refusal = refusal;
        return this.#answer(request);
      }
      const { operations } = request;
      const ran = operations.length === 1 ? this.#operation(operations[0]!) : Promise.all(operations.map((operation) => this.#operation(operation))).then(() => undefined);
      return then(ran, () => this.#answer(request));
    });
  }

  /** The telemetry stage, once the answer is out: its transport calls it once. */
  finish(request: RequestState, answer: Answer): void {
    for (const step of this.#stages.telemetry) step(request, answer);
  }

  /** One operation through the document, admission, plan and execution stages. */
  #operation(operation: OperationState): MaybePromise<void> {
    const { document, admission, plan, execution } = this.#stages;
    const refuse = (verdict: OperationVerdict) => {
      if (verdict !== undefined) operation.result = { errors: verdict instanceof GraphQLError ? [verdict] : verdict };
    };
    // Each stage after the document concerns the operations without a result yet: not refused, not answered.
    const stage = (steps: readonly OperationStep[]) => () => (operation.result === undefined ? then(runSteps<OperationState, OperationVerdict>(steps, operation, this.#refusal), refuse) : undefined);
    const executed = then(then(then(stage(document)(), stage(admission)), stage(plan)), () => (operation.result === undefined ? this.#execute(operation, execution.executor) : undefined));
    return then(executed, () => runAll<OperationState>(execution.result as readonly ResultStep[], operation));
  }

  #execute(operation: OperationState, executor: Stages['execution']['executor']): MaybePromise<void> {
    let result;
    try {
      result = executor(operation);
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

  #answer(request: RequestState, answer: Answer = { status: 200, headers: new Map(), body: null }, from = 0): MaybePromise<Answer> {
    const steps = this.#stages.answer;
    for (let i = from; i < steps.length; i++) {
      const done = steps[i]!(request, answer);
      if (isPromise(done)) return done.then(() => this.#answer(request, answer, i + 1));
    }
    return answer;
  }
}

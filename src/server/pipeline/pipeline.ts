import { GraphQLError } from 'graphql';
import { refusalType } from '../http/refusal.js';
import { serialise } from '../http/serialisation.js';
import { stopParts, type OperationState, type RequestState } from '../request-state.js';
import { stageNames, type Answer, type AnswerStep, type Executor, type IntakeStep, type MaybePromise, type OperationStep, type OperationVerdict, type RequestVerdict, type ResultStep, type Stages, type Steps, type TelemetryStep } from './stages.js';

/** A step's promise: only a step that waits (Redis, an upstream call) makes one; the others run in the same turn. */
const isPromise = <T>(value: MaybePromise<T>): value is Promise<T> => value instanceof Promise;

/** What `runSteps` hands on when it has no continuation: the verdict itself. */
const verdictOf = <V>(verdict: V | undefined): V | undefined => verdict;

/**
 * Runs `steps` on `subject` in order, from `from`, until one gives a verdict (or throws one), then
 * `next` with it (or with undefined): synchronously while the steps are, so a request that waits
 * on nothing makes no promise, and one that waits makes one promise a wait (`next` runs in it).
 */
function runSteps<S, V, R = V | undefined>(
  steps: readonly ((subject: S) => MaybePromise<V | void>)[],
  subject: S,
  refusal: (error: unknown, subject: S) => V,
  next: (verdict: V | undefined) => MaybePromise<R> = verdictOf as (verdict: V | undefined) => R,
  from = 0,
): MaybePromise<R> {
  for (let i = from; i < steps.length; i++) {
    let verdict: MaybePromise<V | void>;
    try {
      verdict = steps[i]!(subject);
    } catch (error) {
      return next(refusal(error, subject));
    }
    if (isPromise(verdict)) return verdict.then((settled) => (settled === undefined ? runSteps(steps, subject, refusal, next, i + 1) : next(settled)), (error: unknown) => next(refusal(error, subject)));
    if (verdict !== undefined) return next(verdict);
  }
  return next(undefined);
}

/**
 * Runs every step in order (`call` runs one), waiting for each that waits. A step that fails
 * (throws, or its promise rejects) is handed to `failed`, and the steps after it still run.
 */
function runEach<T>(steps: readonly T[], call: (step: T) => MaybePromise<void>, failed: (error: unknown) => void, from = 0): MaybePromise<void> {
  for (let i = from; i < steps.length; i++) {
    let done: MaybePromise<void>;
    try {
      done = call(steps[i]!);
    } catch (error) {
      failed(error);
      continue;
    }
    if (isPromise(done)) {
      return done.then(
        () => runEach(steps, call, failed, i + 1),
        (error: unknown) => {
          failed(error);
          return runEach(steps, call, failed, i + 1);
        },
      );
    }
  }
  return undefined;
}

/**
 * An operation whose result step failed: a whole result keeps its data (a mutation's says it was
 * applied) with the failure among its errors, and is serialised afresh (not as kept); parts stop
 * (what the operation still had to do is cancelled) and the failure is its result.
 */
function failedStep(operation: OperationState, failure: GraphQLError): void {
  const { result } = operation;
  operation.kept = undefined;
  if (result !== undefined && Symbol.asyncIterator in result) {
    stopParts(result);
    operation.result = { errors: [failure] };
    return;
  }
  operation.result = { ...result, errors: [...(result?.errors ?? []), failure] };
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
  readonly mask: (error: unknown, gone: boolean) => GraphQLError;
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
  readonly #release: readonly TelemetryStep[];
  readonly #mask: (error: unknown, gone: boolean) => GraphQLError;
  /** What a step that failed, for a request or one of its operations, is answered with: the failure masked (by whether its client is gone). */
  readonly #refuseRequest = (error: unknown, request: RequestState): GraphQLError => this.#mask(error, request.gone);
  readonly #refuseOperation = (error: unknown, operation: OperationState): GraphQLError => this.#mask(error, operation.request.gone);
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
    this.#release = listed(stages.release);
    this.#mask = (error, gone) => (error instanceof GraphQLError ? error : mask(error, gone));
    const { execution, ...rest } = stages;
    this.stages = Object.freeze(Object.fromEntries(stageNames.map((stage) => [stage, stage === 'execution' ? ['executor', ...named(execution.result)] : named(rest[stage])]))) as unknown as Pipeline['stages'];
  }

  /**
   * The request's answer, made by the answer stage once every operation has its result. It is
   * always given (never a rejection): a step's failure is a masked error, in the operation's result
   * or, in the answer stage, the answer.
   */
  run(request: RequestState): MaybePromise<Answer> {
    return runSteps<RequestState, RequestVerdict, Answer>(this.#intake, request, this.#refuseRequest, (refusal) => {
      if (refusal !== undefined) {
        request.refusal = refusal;
        return this.#answered(request);
      }
      const { operations } = request;
      const ran = operations.length === 1 ? this.#operation(operations[0]!) : Promise.all(operations.map((operation) => this.#operation(operation))).then(() => undefined);
      return isPromise(ran) ? ran.then(() => this.#answered(request)) : this.#answered(request);
    });
  }

  /** The telemetry and release stages, once the answer is out: its transport calls it once. Every step runs: one that fails is logged (by the masking) and the next runs. */
  finish(request: RequestState, answer: Answer): void {
    this.#each(this.#telemetry, request, answer);
    this.#each(this.#release, request, answer);
  }

  #each(steps: readonly TelemetryStep[], request: RequestState, answer: Answer): void {
    for (const step of steps) {
      try {
        step(request, answer);
      } catch (error) {
        this.#mask(error, request.gone);
      }
    }
  }

  /**
   * One operation through the document, admission and plan stages, then execution: each stage
   * after the document concerns the operations without a result yet (not refused, not answered),
   * and the execution's result steps every operation, whatever gave it its result.
   */
  #operation(operation: OperationState, from = 0): MaybePromise<void> {
    for (let stage = from; stage < this.#operations.length && operation.result === undefined; stage++) {
      const verdict = runSteps<OperationState, OperationVerdict>(this.#operations[stage]!, operation, this.#refuseOperation);
      if (isPromise(verdict)) {
        return verdict.then((refusal) => {
          refuse(operation, refusal);
          return this.#operation(operation, stage + 1);
        });
      }
      refuse(operation, verdict);
    }
    const executed = operation.result === undefined ? this.#execute(operation) : undefined;
    return isPromise(executed) ? executed.then(() => this.#results(operation)) : this.#results(operation);
  }

  /** A subscription's (or live query's) stream holds no in-flight unit nor caller slot while it is open: the release stage runs as it begins (and again, harmlessly, at the end). */
  #streaming(operation: OperationState): void {
    if ((operation.definition?.operation === 'subscription' || operation.live) && operation.result !== undefined && Symbol.asyncIterator in operation.result) {
      this.#each(this.#release, operation.request, { status: 200, headers: new Map(), body: null });
    }
  }

  /** The execution's result steps: one that fails adds its failure, masked, to the operation's result (`failedStep`). */
  #results(operation: OperationState): MaybePromise<void> {
    return runEach(
      this.#result,
      (step) => step(operation),
      (error) => failedStep(operation, this.#refuseOperation(error, operation)),
    );
  }

  #execute(operation: OperationState): MaybePromise<void> {
    let result;
    try {
      result = this.#executor(operation);
    } catch (error) {
      operation.result = { errors: [this.#refuseOperation(error, operation)] };
      return undefined;
    }
    return isPromise(result)
      ? result.then(
          (done) => {
            operation.result = done;
            this.#streaming(operation);
          },
          (error: unknown) => void (operation.result = { errors: [this.#refuseOperation(error, operation)] }),
        )
      : void (operation.result = result);
  }

  /**
   * The answer stage: its first step makes the answer (status, type, body), each after it writes
   * headers. A step that fails before there is an answer makes it a 500 (the failure masked and
   * logged, in JSON), on which the steps after it still write their headers; one that fails after
   * is logged and its headers left out: the answer made stands.
   */
  #answered(request: RequestState): MaybePromise<Answer> {
    const answer: Answer = { status: 200, headers: new Map(), body: null };
    const done = runEach(
      this.#answer,
      (step) => step(request, answer),
      (error) => this.#failed(error, request, answer),
    );
    return isPromise(done) ? done.then(() => answer) : answer;
  }

  /** A step of the answer stage failed: logged (by the masking); an answer not made yet is made a 500. */
  #failed(error: unknown, request: RequestState, answer: Answer): void {
    const failure = this.#refuseRequest(error, request);
    // Made: a body, or a status of its own (a 304, a refusal without a body).
    if (answer.body !== null || answer.status !== 200) return;
    answer.status = 500;
    answer.headers.set('content-type', refusalType);
    answer.body = serialise({ errors: [failure] });
  }
}

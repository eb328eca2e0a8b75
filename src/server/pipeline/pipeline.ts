import { GraphQLError } from 'graphql';
import { refusalType } from '../http/refusal.js';
import { serialise } from '../http/serialisation.js';
import { isPrepared, type OperationState, type PreparedOperationState } from '../operation-state.js';
import { type HttpRequest, type RequestState, stopParts } from '../request-state.js';
import {
  type Answer,
  type Concerns,
  type ExecutionStep,
  type FinishStep,
  isPromise,
  type MaybePromise,
  type OperationStep,
  type OperationVerdict,
  type Policy,
  type RequestVerdict,
  type StageName,
  stageNames,
} from './stages.js';

/** What `runSteps` hands on when it has no continuation: the verdict itself. */
const verdictOf = <V>(verdict: V | undefined): V | undefined => verdict;

/**
 * Runs `steps` on `subject` in order, from `from`, until one gives a verdict (or throws one), then `next` with it (or
 * with undefined): synchronously while the steps are, so a request that waits on nothing makes no promise, and one that
 * waits makes one promise a wait (`next` runs in it).
 */
function runSteps<S, V, R = V | undefined>(
  steps: readonly ((subject: S) => MaybePromise<V | undefined>)[],
  subject: S,
  refusal: (error: unknown, subject: S) => V,
  next: (verdict: V | undefined) => MaybePromise<R> = verdictOf as (verdict: V | undefined) => R,
  from = 0,
): MaybePromise<R> {
  for (let i = from; i < steps.length; i++) {
    let verdict: MaybePromise<V | undefined>;
    try {
      verdict = steps[i]!(subject);
    } catch (error) {
      return next(refusal(error, subject));
    }
    if (isPromise(verdict)) {
      return verdict.then(
        (settled) => (settled === undefined ? runSteps(steps, subject, refusal, next, i + 1) : next(settled)),
        (error: unknown) => next(refusal(error, subject)),
      );
    }
    if (verdict !== undefined) return next(verdict);
  }
  return next(undefined);
}

/**
 * Steps run in order as one, until one gives a verdict: a policy whose step is several (parse, budget, validate). What
 * one throws is the whole step's failure.
 */
export function inOrder(steps: readonly OperationStep[]): OperationStep {
  const rethrow = (error: unknown): never => {
    throw error;
  };
  return (operation) => runSteps<OperationState, OperationVerdict>(steps, operation, rethrow);
}

/**
 * Runs every step in order (`call` runs one), waiting for each that waits. A step that fails (throws, or its promise
 * rejects) is handed to `failed`, and the steps after it still run.
 */
function runEach<T>(
  steps: readonly T[],
  call: (step: T) => MaybePromise<void>,
  failed: (error: unknown) => void,
  from = 0,
): MaybePromise<void> {
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
 * An operation whose result step failed: a whole result keeps its data (a mutation's says it was applied) with the
 * failure among its errors, and is serialised afresh (not as kept); parts stop and the failure is its result.
 */
function failedStep(operation: OperationState, failure: GraphQLError): void {
  const { result } = operation;
  operation.cached = undefined;
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

/** Whether policies concerning `concerns` meet operations of this kind (a client's, or a subscription's event). */
const meets = (concerns: Concerns | undefined, event: boolean): boolean =>
  event ? concerns === 'also events' || concerns === 'events only' : concerns !== 'events only';

/** The steps of each stage for one kind of operation, in the order of the policies that have them. */
function stageSteps(policies: readonly Policy[], event: boolean) {
  const concerned = policies.filter((policy) => meets(policy.concerns, event));
  const of = <S extends StageName>(stage: S): readonly NonNullable<Policy[S]>[] =>
    concerned.flatMap((policy) => (policy[stage] === undefined ? [] : [policy[stage]!]));
  return {
    intake: of('intake'),
    /** The document, admission and plan stages, in turn: the two after the document's given what it prepared. */
    operations: [of('document'), ...([of('admission'), of('plan')] as OperationStep[][])],
    execution: of('execution'),
    result: of('result'),
    answer: of('answer'),
    record: of('record'),
    release: of('release'),
    /** Each stage's policies by name, in order. */
    names: Object.freeze(
      Object.fromEntries(
        stageNames.map((stage) => [
          stage,
          concerned.filter((policy) => policy[stage] !== undefined).map((policy) => policy.name),
        ]),
      ),
    ) as unknown as Readonly<Record<StageName, readonly string[]>>,
  };
}
type StageSteps = ReturnType<typeof stageSteps>;

export interface PipelineOptions {
  /** The policies, in order: each stage runs their steps in this order (gateway.ts lists them). */
  readonly policies: readonly Policy[];
  /** The one masking (answers/masking.ts): what a step that throws anything but a GraphQL error is answered. */
  readonly mask: (error: unknown, gone: boolean) => GraphQLError;
}

/**
 * The stages in order (stages.ts). An HTTP request enters at `run`, to its answer; a WebSocket message or a
 * subscription's event at `operation`, to its result. Either way its transport calls `finish` once what it sent is out.
 */
export class Pipeline {
  readonly #clients: StageSteps;
  readonly #events: StageSteps;
  readonly #mask: (error: unknown, gone: boolean) => GraphQLError;
  /** A failed step's answer, for a request or one of its operations: masked, by whether its client is gone. */
  readonly #refuseRequest = (error: unknown, request: RequestState): GraphQLError => this.#mask(error, request.gone);
  readonly #refuseOperation = (error: unknown, operation: OperationState): GraphQLError =>
    this.#mask(error, operation.request.gone);

  constructor(options: PipelineOptions) {
    const { policies, mask } = options;
    this.#clients = stageSteps(policies, false);
    this.#events = stageSteps(policies, true);
    this.#mask = (error, gone) => (error instanceof GraphQLError ? error : mask(error, gone));
  }

  /** Each stage's policies by name, in order, for a client's operations: what docs/architecture.md draws. */
  get stages(): Readonly<Record<StageName, readonly string[]>> {
    return this.#clients.names;
  }

  /** Each stage's policies by name, in order, for a subscription's events. */
  get eventStages(): Readonly<Record<StageName, readonly string[]>> {
    return this.#events.names;
  }

  /**
   * An HTTP request's answer, made by the answer stage once every operation has its result. Never rejects: a step's
   * failure is a masked error, in the operation's result or, in the answer stage, the answer.
   */
  run(request: HttpRequest): MaybePromise<Answer> {
    return runSteps<HttpRequest, RequestVerdict, Answer>(
      this.#clients.intake,
      request,
      this.#refuseRequest,
      (refusal) => {
        if (refusal !== undefined) {
          request.refusal = refusal;
          return this.#answered(request);
        }
        const { operations } = request;
        const ran =
          operations.length === 1
            ? this.operation(operations[0]!)
            : Promise.all(operations.map((operation) => this.operation(operation))).then(() => undefined);
        return isPromise(ran) ? ran.then(() => this.#answered(request)) : this.#answered(request);
      },
    );
  }

  /**
   * One operation through the document, admission and plan stages while it has no result (not refused, not answered),
   * then execution, then the result stage whatever gave it its result. Never rejects: a step's failure is its result.
   */
  operation(operation: OperationState): MaybePromise<void> {
    return this.#operation(operation.event === undefined ? this.#clients : this.#events, operation, 0);
  }

  /** The record and release stages, once its results are out (its transport calls it once): every step runs. */
  finish(request: RequestState): void {
    const steps = request.operations[0]?.event === undefined ? this.#clients : this.#events;
    this.#each(steps.record, request);
    this.#each(steps.release, request);
  }

  #each(steps: readonly FinishStep[], request: RequestState): void {
    for (const step of steps) {
      try {
        step(request);
      } catch (error) {
        this.#refuseRequest(error, request);
      }
    }
  }

  /**
   * The stages after the document stage are given the operation it prepared: one it left without a document is the
   * gateway's fault (a list of policies without such a step), refused before any of them.
   */
  #operation(steps: StageSteps, operation: OperationState, from: number): MaybePromise<void> {
    for (let stage = from; stage < steps.operations.length && operation.result === undefined; stage++) {
      if (stage > 0 && !isPrepared(operation)) {
        this.#fail(operation, new Error('No step prepared its document'));
        break;
      }
      const verdict = runSteps<OperationState, OperationVerdict>(
        steps.operations[stage]!,
        operation,
        this.#refuseOperation,
      );
      if (isPromise(verdict)) {
        return verdict.then((refusal) => {
          refuse(operation, refusal);
          return this.#operation(steps, operation, stage + 1);
        });
      }
      refuse(operation, verdict);
    }
    const executed =
      operation.result === undefined ? this.#execute(steps, operation as PreparedOperationState) : undefined;
    return isPromise(executed) ? executed.then(() => this.#results(steps, operation)) : this.#results(steps, operation);
  }

  /** The result stage: a step that fails adds its failure, masked, to the operation's result (`failedStep`). */
  #results(steps: StageSteps, operation: OperationState): MaybePromise<void> {
    return runEach(
      steps.result,
      (step) => step(operation),
      (error) => failedStep(operation, this.#refuseOperation(error, operation)),
    );
  }

  /** The execution stage: the first policy whose step takes the operation runs it. */
  #execute(steps: StageSteps, operation: PreparedOperationState): MaybePromise<void> {
    let result: ReturnType<ExecutionStep> | undefined;
    try {
      for (const step of steps.execution) {
        result = step(operation);
        if (result !== undefined) break;
      }
    } catch (error) {
      return this.#fail(operation, error);
    }
    if (result === undefined) return this.#fail(operation, new Error('No policy runs this operation'));
    if (!isPromise(result)) {
      operation.result = result;
      return undefined;
    }
    return result.then(
      (done) => {
        operation.result = done;
      },
      (error: unknown) => this.#fail(operation, error),
    );
  }

  /** A failure, masked, is the operation's result. */
  #fail(operation: OperationState, error: unknown): void {
    operation.result = { errors: [this.#refuseOperation(error, operation)] };
  }

  /**
   * The answer stage: the answer body's step makes the answer (status, type, body), each other step writes headers. A
   * step that fails before there is an answer makes it a 500 (the failure masked and logged, in JSON), on which the
   * steps after it still write their headers; one that fails after is logged and its headers left out.
   */
  #answered(request: HttpRequest): MaybePromise<Answer> {
    const answer: Answer = { status: 200, headers: new Map(), body: null };
    const done = runEach(
      this.#clients.answer,
      (step) => step(request, answer),
      (error) => this.#failed(error, request, answer),
    );
    return isPromise(done) ? done.then(() => answer) : answer;
  }

  #failed(error: unknown, request: RequestState, answer: Answer): void {
    const failure = this.#refuseRequest(error, request);
    // Made: a body, or a status of its own (a 304, a refusal without a body).
    if (answer.body !== null || answer.status !== 200) return;
    answer.status = 500;
    answer.headers.set('content-type', refusalType);
    answer.body = serialise({ errors: [failure] });
  }
}

import type { GraphQLError } from 'graphql';
import type { Readable } from 'node:stream';
import type { Incoming, OperationResult, OperationState, RequestState, WholeAnswer } from '../request-state.js';

export type { WholeAnswer };

/*
 * The one path every GraphQL request takes, on every transport, as typed stages (Apollo Router's
 * structure): each stage is a list of steps, written once, run in the order listed. A policy is a
 * `useX(options)` object (yoga's style) with a step for each stage it acts in; the gateway lists
 * them stage by stage (gateway.ts). What a hot request saves is work done once per document (the
 * prepared document, its plan's shape, its compiled code): no stage is skipped for it.
 */

export type MaybePromise<T> = T | Promise<T>;


/**
 * What a request's step says: go on (nothing), or stop with a refusal (a GraphQL error, answered
 * in the agreed media type with the status its `extensions.http` says) or a whole answer.
 */
export type RequestVerdict = GraphQLError | WholeAnswer | undefined;

/** What an operation's step says: go on (nothing), or stop with a refusal (one error, or several), which becomes the operation's result. */
export type OperationVerdict = GraphQLError | readonly GraphQLError[] | undefined;

/** A step of the intake stage: on the request, as it arrives and as its parameters are read. */
export type IntakeStep = (request: RequestState) => MaybePromise<RequestVerdict | void>;

/** A step of the document, admission or plan stage: on one operation. */
export type OperationStep = (operation: OperationState) => MaybePromise<OperationVerdict | void>;

/** Runs an operation that has no result yet: its compiled code or the interpreter (documents/execution.ts). */
export type Executor = (operation: OperationState) => MaybePromise<OperationResult>;

/** A step of the execution stage once its result is there (or a step before it answered it): it may replace `operation.result`. */
export type ResultStep = (operation: OperationState) => MaybePromise<void>;

/** The answer being made: its status, its headers (lower-case names, each written by one step) and its body. */
export interface Answer {
  status: number;
  readonly headers: Map<string, string>;
  /** One JSON document (or a page), nothing, or parts as they come. */
  body: string | null | Readable;
}

/** A step of the answer stage: what the answer says beyond its body, from the request's state. */
export type AnswerStep = (request: RequestState, answer: Answer) => MaybePromise<void>;

/** A step of the telemetry stage: once the answer is out (a stream's last part, or its client gone). */
export type TelemetryStep = (request: RequestState, answer: Answer) => void;

/**
 * A stage's steps, named, in the order they run (an object's keys keep theirs): a policy that is
 * off leaves its step undefined, and the stage has no such step.
 */
export type Steps<T> = Readonly<Record<string, T | undefined>>;

/**
 * The stages, in the order a request meets them, each stating which requests it concerns:
 * - intake: every request to the GraphQL endpoint, its head, then its parameters read;
 * - document: every operation its parameters name: the text named (APQ, trusted documents), parsed
 *   and validated once per text, the operation selected;
 * - admission: operations without a result (not refused): the caller limits, a kept answer;
 * - plan: operations without a result: the upstream plan and what it is charged;
 * - execution: operations without a result are run (`executor`); then `result` steps see every
 *   operation's result, however it came (run, refused, kept);
 * - answer: every request: its media type, status, serialisation, then each header's one writer;
 * - telemetry: every request, once its answer is out;
 * - release: what the request holds (its in-flight unit, its caller's slots) given back, once its
 *   answer is out, or as soon as it is a subscription's stream (which holds none of them open).
 */
export interface Stages {
  readonly intake: Steps<IntakeStep>;
  readonly document: Steps<OperationStep>;
  readonly admission: Steps<OperationStep>;
  readonly plan: Steps<OperationStep>;
  readonly execution: { readonly executor: Executor; readonly result: Steps<ResultStep> };
  readonly answer: Steps<AnswerStep>;
  readonly telemetry: Steps<TelemetryStep>;
  readonly release: Steps<TelemetryStep>;
}

/** The names of the stages, in order: what docs/architecture.md draws and a test holds. */
export const stageNames = ['intake', 'document', 'admission', 'plan', 'execution', 'answer', 'telemetry', 'release'] as const satisfies readonly (keyof Stages)[];

/** An answer ready to go out, and what its transport calls once it is out (the telemetry stage, for the GraphQL endpoint's): a second call does nothing. */
export interface Served {
  readonly answer: Answer;
  done(): void;
  /** The GraphQL endpoint's request, its operations' results read by a transport that sends them itself (WebSocket, a subscription's events). */
  readonly request?: RequestState | undefined;
}

/** What every transport hands each request to: the gateway's one door (routes.ts). */
export type Serve = (incoming: Incoming) => MaybePromise<Served>;

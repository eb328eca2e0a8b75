import type { Readable } from 'node:stream';
import type { GraphQLError } from 'graphql';
import type { HttpIncoming, WholeAnswer } from '../incoming.js';
import type { OperationState, PreparedOperationState } from '../operation-state.js';
import type { HttpRequest, OperationResult, RequestState } from '../request-state.js';

/*
 * The one path every GraphQL operation takes, on every transport, as typed stages (Apollo Router's structure). A
 * policy is one value (`Policy`) that names the stages it takes part in and its step in each; gateway.ts lists the
 * policies in order, and the pipeline derives each stage's steps from that list. A transport enters where its work
 * begins: HTTP at the intake, a WebSocket message and a subscription's event at the document stage. What a hot request
 * saves is work done once per document (its prepared document, plan shape, compiled code): no stage is skipped for it.
 */

export type MaybePromise<T> = T | Promise<T>;

/** Whether a value is a promise: the one test the gateway's steps use (a step that waits returns one). */
export const isPromise = <T>(value: MaybePromise<T>): value is Promise<T> => value instanceof Promise;

/**
 * What a request's step says: go on (nothing), or stop with a refusal (a GraphQL error, answered in the agreed media
 * type with the status its `extensions.http` says) or a whole answer.
 */
export type RequestVerdict = GraphQLError | WholeAnswer | undefined;

/** What an operation's step says: go on (nothing), or stop with a refusal (one error or several), its result. */
export type OperationVerdict = GraphQLError | readonly GraphQLError[] | undefined;

/** A step of the intake stage: an HTTP request as it arrives, and as its parameters are read. */
export type IntakeStep = (request: HttpRequest) => MaybePromise<RequestVerdict>;

/**
 * A step on one operation: of the document stage (on the operation as its parameters made it), or of the admission and
 * plan stages (`OperationStep<PreparedOperationState>`: on the operation whose document the document stage prepared).
 */
export type OperationStep<O extends OperationState = OperationState> = (operation: O) => MaybePromise<OperationVerdict>;

/**
 * A step of the execution stage: the prepared operation's result (its compiled code or the interpreter, a
 * subscription's stream), or undefined when the operation is not its to run: the next policy's step is asked.
 */
export type ExecutionStep = (operation: PreparedOperationState) => MaybePromise<OperationResult> | undefined;

/** A step of the result stage, once the operation has its result, however it came: it may replace its result. */
export type ResultStep = (operation: OperationState) => MaybePromise<void>;

/** The answer being made: its status, its headers (lower-case names, each written by one step) and its body. */
export interface Answer {
  status: number;
  readonly headers: Map<string, string>;
  /** One JSON document (or a page), nothing, or parts as they come. */
  body: string | null | Readable;
}

/** A step of the answer stage: what an HTTP answer says, from the request's state. */
export type AnswerStep = (request: HttpRequest, answer: Answer) => MaybePromise<void>;

/** A step of the record or release stage, once its results are out (a stream's last part, or its client gone). */
export type FinishStep = (request: RequestState) => void;

/**
 * The stages, in the order an operation meets them:
 * - intake: an HTTP request to the GraphQL endpoint, its head, then its parameters read (its operations made);
 * - document: every operation: the text named (APQ, trusted documents), parsed and validated once per text, the
 *   operation selected; counted in flight;
 * - admission: operations without a result (not refused): the caller limits, a kept answer;
 * - plan: operations without a result: the upstream plan and what it is charged;
 * - execution: operations without a result are run, by the first policy whose step takes them;
 * - result: every operation's result, however it came (run, refused, kept);
 * - answer: an HTTP request's answer: its media type, status, serialisation, then each header's one writer;
 * - record: every request, once its results are out (its operations' spans, metrics, log lines);
 * - release: what the request holds (its units in flight, its caller's slots) given back once its results are out, or
 *   as soon as it is a subscription's stream (which holds none of them open).
 */
export const stageNames = [
  'intake',
  'document',
  'admission',
  'plan',
  'execution',
  'result',
  'answer',
  'record',
  'release',
] as const;
export type StageName = (typeof stageNames)[number];

/** Which operations a policy concerns: a client's (the default), a subscription's events too, or only those events. */
export type Concerns = 'clients' | 'also events' | 'events only';

/**
 * A policy: its name, the operations it concerns, and its step in each stage it takes part in. A subscription's event
 * (the gateway's own resolution of a change, on its subscribers' behalf) meets only the policies that concern events:
 * it was named, parsed, validated, admitted and counted as its subscription's, and is nobody's request.
 */
export interface Policy {
  readonly name: string;
  /** @default 'clients' */
  readonly concerns?: Concerns;
  readonly intake?: IntakeStep | undefined;
  readonly document?: OperationStep | undefined;
  readonly admission?: OperationStep<PreparedOperationState> | undefined;
  readonly plan?: OperationStep<PreparedOperationState> | undefined;
  readonly execution?: ExecutionStep | undefined;
  readonly result?: ResultStep | undefined;
  readonly answer?: AnswerStep | undefined;
  readonly record?: FinishStep | undefined;
  readonly release?: FinishStep | undefined;
}

/** An answer to send, and what its transport calls once it is out (record, release): a second call does nothing. */
export interface Served {
  readonly answer: Answer;
  done(): void;
}

/** What the HTTP transports hand each request to: the gateway's one door (routes.ts). */
export type Serve = (incoming: HttpIncoming) => MaybePromise<Served>;

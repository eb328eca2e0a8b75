import type { ExecutionResult, GraphQLError } from 'graphql';
import { MessageType, type SubscribePayload, stringifyMessage } from 'graphql-ws';
import type { CallerRules } from '../callers.js';
import { errorsJson, publicResult } from '../http/serialisation.js';
import type { Incoming, Negotiated } from '../incoming.js';
import { OperationState } from '../operation-state.js';
import type { OperationEntry } from '../real-time/event-resolutions.js';
import { type OperationParams, RequestState } from '../request-state.js';

/** What carries a WebSocket operation's results: messages, `next` per result or part. */
const messages: Negotiated = Object.freeze({
  whole: 'application/json',
  parts: 'websocket',
  alpha9: false,
  subscriptionSpec: false,
});

/** What a client reads of a stream that failed. */
const unexpected = Object.freeze({
  message: 'Unexpected error.',
  extensions: { code: 'INTERNAL_SERVER_ERROR' },
}) as unknown as GraphQLError;

export interface OperationSocket {
  send(data: string): void;
  ended(operation: SocketOperation): void;
}

/**
 * One operation of a socket: its own abort signal and stream, whatever id the client gave it. The client's `complete`
 * (or the socket's close) cancels it: what it still runs (upstream calls included) is aborted, nothing more is sent.
 */
export class SocketOperation {
  readonly #controller = new AbortController();
  #stream: AsyncIterator<ExecutionResult> | undefined;

  constructor(
    readonly id: string,
    private readonly socket: OperationSocket,
  ) {}

  get cancelled(): boolean {
    return this.#controller.signal.aborted;
  }

  cancel(): void {
    if (this.cancelled) return;
    this.#controller.abort();
    void this.#stream?.return?.();
  }

  /** The operation on the one path, entering at the document stage, its results sent as they come. */
  async run(
    entry: OperationEntry,
    payload: SubscribePayload,
    incoming: Omit<Incoming, 'signal' | 'gone'>,
    callers: CallerRules,
  ): Promise<void> {
    const { id } = this;
    const { signal } = this.#controller;
    const request = new RequestState(
      {
        ...incoming,
        signal,
        get gone() {
          return signal.aborted;
        },
      },
      callers,
      { carries: messages },
    );
    const operation = new OperationState({ ...payload } as OperationParams, request);
    try {
      await entry.operation(operation);
      const result = operation.result!;
      if (!(Symbol.asyncIterator in result)) {
        // Ended before execution (no `data`): its errors are the subscribe message's `error`.
        if (!('data' in result))
          return this.#send({
            id,
            type: MessageType.Error,
            payload: errorsJson(result.errors ?? []) as GraphQLError[],
          });
        this.#send({ id, type: MessageType.Next, payload: publicResult(result) });
      } else {
        const stream = result[Symbol.asyncIterator]();
        this.#stream = stream;
        if (this.cancelled) void stream.return?.();
        try {
          for (let part = await stream.next(); part.done !== true && !this.cancelled; part = await stream.next())
            this.#send({ id, type: MessageType.Next, payload: publicResult(part.value) });
        } catch {
          // The stream failed (not a part's own errors): it ends with an error, as graphql-ws's server ends it.
          return this.#send({ id, type: MessageType.Error, payload: [unexpected] });
        }
      }
      this.#send({ id, type: MessageType.Complete });
    } finally {
      entry.finish(request);
      this.socket.ended(this);
    }
  }

  /** A message of this operation's, unless it was cancelled (the client completed it, or left). */
  #send(message: Parameters<typeof stringifyMessage>[0]): void {
    if (!this.cancelled) this.socket.send(stringifyMessage(message));
  }
}

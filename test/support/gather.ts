/**
 * A stream of results (a client library's subscription: graphql-sse's or graphql-ws's `iterate`)
 * read as it comes: its results gathered, `ended` once it is over, `failure` what it threw (a
 * refused stream: graphql-sse's client throws with the response), `stop` the client's leaving.
 */
export interface Gathered<T> {
  readonly results: T[];
  readonly ended: boolean;
  /** Resolves once the stream is over: with what it threw, if it threw. */
  readonly failure: Promise<unknown>;
  stop(): Promise<unknown>;
}

export function gather<T>(stream: AsyncIterableIterator<T> | AsyncGenerator<T>): Gathered<T> {
  const results: T[] = [];
  let ended = false;
  const failure = (async () => {
    try {
      for await (const result of stream) results.push(result);
      return undefined;
    } catch (error) {
      return error;
    } finally {
      ended = true;
    }
  })();
  return {
    results,
    get ended() {
      return ended;
    },
    failure,
    stop: async () => stream.return?.(undefined),
  };
}

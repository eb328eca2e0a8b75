import { finalAsyncIterator, isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { LoadShedder } from './load-shedder.js';
import { pathOf, servedAsGraphQL } from '../http/paths.js';

/** How many of the shedder's in-flight operations a request holds until its response goes. */
const heldKey = Symbol('load-shedding.held');
/** A batch's operations seen so far: the first is the request's own hold. */
const batchKey = Symbol('load-shedding.batch');

type RequestState = { [heldKey]?: number; [batchKey]?: number };

/**
 * The request's own state: a batch's operations each get a context whose prototype is the
 * request's (yoga's `Object.create(serverContext)`); a single operation's context is the request's.
 */
const requestOf = (context: object): RequestState => (Object.hasOwn(context, heldKey) ? context : Object.getPrototypeOf(context)) as RequestState;

/**
 * Load shedding inside yoga (server/traffic/load-shedder.ts decides): a new GraphQL request is refused
 * with HTTP 503, `Retry-After` and code OVERLOADED in onRequest, before its body is read or
 * anything runs, when the shedder refuses. The HTTP server refuses most such requests before yoga
 * (its `refuseEarly`); this covers those it hands on (browsers, whose answer needs yoga's CORS
 * headers) and the gateway driven through `yoga.fetch`. Other paths (the probes, the pages) are
 * never refused. Each operation admitted is counted in flight until its response is out: a
 * batch's operations each, an @defer/@stream one until its last part or its client hangs up.
 */
export function useLoadShedding(shedder: LoadShedder): Plugin {
  let endpoint = '/graphql';
  const release = () => shedder.inFlight--;
  return {
    onYogaInit({ yoga }) {
      endpoint = yoga.graphqlEndpoint;
    },
    onRequest({ request, serverContext, fetchAPI, endResponse }) {
      const { url } = request;
      if (!url.endsWith(endpoint) && !servedAsGraphQL(url, pathOf(url), endpoint)) return;
      // A fresh headers object: yoga's Node adapter writes content-length into the one it is given.
      if (shedder.refuses()) return endResponse(new fetchAPI.Response(shedder.body, { status: 503, headers: { ...shedder.headers } }));
      shedder.inFlight++;
      (serverContext as RequestState)[heldKey] = 1;
    },
    onParams({ context }) {
      if (Object.hasOwn(context, heldKey)) return;
      const state = requestOf(context);
      if (state[heldKey] === undefined) return;
      state[batchKey] = (state[batchKey] ?? 0) + 1;
      if (state[batchKey] === 1) return;
      shedder.inFlight++;
      state[heldKey]++;
    },
    onExecutionResult({ result, setResult, context }) {
      if (!isAsyncIterable(result)) return;
      const state = requestOf(context);
      if (!state[heldKey]) return;
      // Its end is the stream's: the last part taken, or the stream cancelled (yoga stops it when the client hangs up).
      state[heldKey]--;
      setResult(finalAsyncIterator(result, release));
    },
    onResponse({ serverContext }) {
      const state = serverContext as RequestState;
      const held = state[heldKey];
      if (!held) return;
      state[heldKey] = 0;
      shedder.inFlight -= held;
    },
  };
}

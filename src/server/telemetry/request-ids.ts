import type { Plugin } from 'graphql-yoga';
import { batchOf } from '../../loaders/request-batch.js';
import { requestIdFrom, type GatewayContext } from '../../schema/context.js';

/** The ids made for requests refused before their context was (the context makes its own). */
const madeForRefusal = new WeakMap<Request, string>();

/**
 * The request id of an operation: its context's (the incoming `x-request-id`, or one made for
 * the request); for an operation refused before it had a context, one made here by the same rule,
 * once per request, which its answer then echoes.
 */
export function requestIdOf(context: Partial<Pick<GatewayContext, 'requestId'>>, request: Request | undefined): string | undefined {
  if (context.requestId !== undefined || request === undefined) return context.requestId;
  let id = madeForRefusal.get(request);
  if (id === undefined) madeForRefusal.set(request, (id = requestIdFrom(request)));
  return id;
}

/**
 * Every answer to a GraphQL request carries its `x-request-id`: the id its log lines and upstream
 * calls carry. A batch's operations share their batch's. Answers that are not GraphQL (probes,
 * pages) carry none.
 */
export function useRequestIds(): Plugin {
  return {
    onResponse({ request, response, serverContext }) {
      const requestId = (serverContext as Partial<GatewayContext>).requestId ?? batchOf(request)?.requestId ?? madeForRefusal.get(request);
      if (requestId !== undefined) response.headers.set('x-request-id', requestId);
    },
  };
}

import type { CallerRules } from './callers.js';
import { pathOf, servedAsGraphQL } from './http/paths.js';
import type { WholeAnswer } from './incoming.js';
import type { Pipeline } from './pipeline/pipeline.js';
import type { Answer, AnswerStep, MaybePromise, Serve, Served } from './pipeline/stages.js';
import { type HttpRequest, RequestState } from './request-state.js';

/** A route beside the GraphQL endpoint: its answer to a request of `path`, or undefined when it is not its. */
export type Route = (request: HttpRequest, path: string) => MaybePromise<WholeAnswer> | undefined;

export interface RoutesOptions {
  readonly endpoint: string;
  readonly pipeline: Pipeline;
  /** SUBGRAPH_PATH's endpoint: the same stages over the subgraph schema (its path alone, `/` after it or not). */
  readonly subgraph?: { readonly path: string; readonly pipeline: Pipeline } | undefined;
  /** How a request's caller is told (callers.ts): TRUST_PROXY, the tokens known to be real. */
  readonly callers: CallerRules;
  /** GraphiQL, where it is on: the page a browser's view of the endpoint gets instead of a GraphQL answer. */
  readonly graphiql: Route | undefined;
  /** The answer to a CORS preflight (OPTIONS, any path), where CORS is on. */
  readonly preflight: WholeAnswer | undefined;
  /** The pages (pages/front-door.ts) and probes (probes/routes.ts), in turn. */
  readonly routes: readonly Route[];
  /** What every answer says, the pipeline's or a route's (CORS, the cache headers): the answer stage's last steps. */
  readonly everyAnswer: readonly AnswerStep[];
}

const notFound: WholeAnswer = { status: 404, headers: {}, body: null };

/**
 * Every request, whatever its transport: the GraphQL endpoint's through the one path (the pipeline's stages), the rest
 * (a CORS preflight, GraphiQL, the front door's pages, the probes, anything else 404) answered beside it, each with the
 * headers every answer carries.
 */
export function routes(options: RoutesOptions): Serve {
  const { endpoint, pipeline, subgraph, callers } = options;
  const nothingToDo = () => undefined;
  const whole = (request: HttpRequest, made: MaybePromise<WholeAnswer>): MaybePromise<Served> => {
    if (made instanceof Promise) return made.then((ready) => whole(request, ready));
    const answer: Answer = {
      status: made.status,
      headers: new Map(Object.entries(made.headers).map(([name, value]) => [name.toLowerCase(), value])),
      body: made.body,
    };
    let written: Promise<void> | undefined;
    for (const step of options.everyAnswer)
      written =
        written !== undefined ? written.then(() => step(request, answer)) : (step(request, answer) ?? undefined);
    return written !== undefined ? written.then(() => ({ answer, done: nothingToDo })) : { answer, done: nothingToDo };
  };
  const routed = (request: HttpRequest, path: string): MaybePromise<Served> | undefined => {
    if (request.http.method === 'OPTIONS' && options.preflight !== undefined) return whole(request, options.preflight);
    for (const route of options.routes) {
      const made = route(request, path);
      if (made !== undefined) return whole(request, made);
    }
    return undefined;
  };
  return (incoming) => {
    const request = RequestState.ofHttp(incoming, callers);
    const path = pathOf(incoming.target);
    // The routes first, as their paths say (a probe's query string may end in the endpoint's path).
    const answered = routed(request, path);
    if (answered !== undefined) return answered;
    let endpointPipeline: Pipeline;
    if (subgraph !== undefined && (path === subgraph.path || path === `${subgraph.path}/`))
      endpointPipeline = subgraph.pipeline;
    else if (servedAsGraphQL(incoming.target, path, endpoint)) {
      const page = options.graphiql?.(request, path);
      if (page !== undefined) return whole(request, page);
      endpointPipeline = pipeline;
    } else return whole(request, notFound);
    const answer = endpointPipeline.run(request);
    let out = false;
    const done = () => {
      if (out) return;
      out = true;
      endpointPipeline.finish(request);
    };
    return answer instanceof Promise ? answer.then((ready) => ({ answer: ready, done })) : { answer, done };
  };
}

import { GraphQLError } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

const notJson = (what: string) => createGraphQLError(`${what} is not valid JSON.`, { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });

/** Which URL parameter of a GET did not parse (yoga's GET parser only throws JSON.parse's SyntaxError). */
function badUrlParameter(request: Request): string {
  const parameters = new URL(request.url).searchParams;
  for (const name of ['variables', 'extensions']) {
    const value = parameters.get(name);
    if (value === null || value === '') continue;
    try {
      JSON.parse(value);
    } catch {
      return `The "${name}" URL parameter`;
    }
  }
  return 'A request parameter';
}

/**
 * Whether a JSON value nests objects and lists more than `max` deep (`{"a":1}` is one deep), read
 * level by level with no recursion: a body within MAX_BODY_BYTES may nest some 50,000 levels,
 * which every recursive reader of variables (coercion, the response cache's key) would overflow on.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  let level: object[] = value !== null && typeof value === 'object' ? [value] : [];
  for (let depth = 1; level.length > 0; depth++) {
    if (depth > max) return true;
    const next: object[] = [];
    for (const container of level) for (const item of Array.isArray(container) ? container : Object.values(container)) if (item !== null && typeof item === 'object') next.push(item as object);
    level = next;
  }
  return false;
}

const tooDeep = (max: number) =>
  createGraphQLError(`The request's variables are nested more than ${max} levels deep.`, { extensions: { code: 'BAD_REQUEST', limit: 'variables_depth', maxVariablesDepth: max, http: { status: 400 } } });

export interface RequestParamsOptions {
  /** MAX_VARIABLES_DEPTH */
  readonly maxVariablesDepth: number;
  /** Told of every request refused for its variables' depth, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Malformed request parameters are the client's mistake, answered HTTP 400 with code BAD_REQUEST
 * and without a word of what was sent: yoga's JSON body parser echoes the body in
 * `extensions.originalError` (JSON.parse quotes it), and its GET parser lets JSON.parse's
 * SyntaxError out for malformed `variables`/`extensions`, which became INTERNAL_SERVER_ERROR.
 * Coded errors of the parser (the body cap's 413, yoga's own 400s) pass as they are. Variables
 * nested deeper than MAX_VARIABLES_DEPTH are refused likewise (HTTP 400, BAD_REQUEST, `limit:
 * "variables_depth"`), before any other plugin reads them.
 */
export function useStrictRequestParams(options: RequestParamsOptions): Plugin {
  const { maxVariablesDepth } = options;
  return {
    onParams({ params }) {
      if (!nestedDeeperThan(params.variables, maxVariablesDepth)) return;
      options.onRefused?.();
      throw tooDeep(maxVariablesDepth);
    },
    onRequestParse({ request, requestParser, setRequestParser }) {
      if (requestParser === undefined) return;
      setRequestParser(async (incoming) => {
        try {
          return await requestParser(incoming);
        } catch (error) {
          if (error instanceof GraphQLError && error.extensions.originalError === undefined) throw error;
          if (error instanceof GraphQLError || (error instanceof SyntaxError && request.method === 'POST')) throw notJson('The request body');
          if (error instanceof SyntaxError) throw notJson(badUrlParameter(request));
          throw error;
        }
      });
    },
  };
}

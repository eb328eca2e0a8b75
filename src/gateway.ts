import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { createYoga, type YogaServerInstance } from 'graphql-yoga';
import type { Logger } from 'pino';
import { createContext, type GatewayContext } from './context.js';
import { maskError } from './schema/errors.js';
import { schema } from './schema/index.js';
import type { Upstream } from './upstream/upstream.js';

export const defaultGraphiQLQuery = `# A head and its hair in one round trip.
# Fields marked "Needs a bearer token" (permissions, deleteHead) want an
# Authorization header: run the login mutation, then add
#   {"Authorization": "Bearer <accessToken>"}
# in the Headers pane below.
query HeadsWithHair {
  heads(first: 3) {
    totalCount
    nodes {
      id
      name
      url
      createdAt
      hair {
        name
        url
        style
        gender
      }
    }
  }
}
`;

export interface GatewayOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  /** Upstream calls one request may have in flight at once. @default 10 */
  readonly fanout?: number;
  /** Serve GraphiQL to browsers at the GraphQL endpoint. @default true */
  readonly graphiql?: boolean;
}

export type Gateway = YogaServerInstance<Record<string, unknown>, GatewayContext>;

/** The yoga app: tests drive it with `yoga.fetch`, `main.ts` serves it on a port. */
export function createGateway(options: GatewayOptions): Gateway {
  const { upstream, logger } = options;
  return createYoga<Record<string, unknown>, GatewayContext>({
    schema,
    graphqlEndpoint: '/graphql',
    context: ({ request }) => createContext(request, { upstream, logger, fanout: options.fanout }),
    maskedErrors: { maskError: (error, message) => maskError(error, message) },
    logging: {
      debug: (...args) => logger.debug(args.map(String).join(' ')),
      info: (...args) => logger.info(args.map(String).join(' ')),
      warn: (...args) => logger.warn(args.map(String).join(' ')),
      error: (...args) => logger.error(args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ')),
    },
    graphiql: options.graphiql === false ? false : { title: 'Avatar Head gateway', defaultQuery: defaultGraphiQLQuery, isHeadersEditorEnabled: true, defaultEditorToolsVisibility: 'headers' },
    renderGraphiQL,
    landingPage: false,
  });
}

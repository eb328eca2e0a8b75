import { createServer } from 'node:http';
import { createRedisEventTarget } from '@graphql-yoga/redis-event-target';
import { useServer } from 'graphql-ws/use/ws';
import { createPubSub, createSchema, createYoga } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { WebSocketServer } from 'ws';

/*
 * The comparator of `npm run bench:subscriptions`: a bare yoga, as its docs build subscriptions,
 * with `createPubSub` (and `@graphql-yoga/redis-event-target` with REDIS_URL), over the same
 * reference upstream. `touch(id:)` publishes a change; each subscriber's `head` is read from the
 * upstream by its own resolver (yoga resolves every subscriber's event on its own).
 */

const upstream = process.env.UPSTREAM_URL!;
const redisUrl = process.env.REDIS_URL;
type Topics = { headChanged: [id: string, change: { id: string }] };
const pubsub = createPubSub<Topics>(
  redisUrl === undefined
    ? undefined
    : {
        eventTarget: createRedisEventTarget({
          publishClient: new Redis(redisUrl),
          subscribeClient: new Redis(redisUrl),
        }) as never,
      },
);

const schema = createSchema({
  typeDefs: /* GraphQL */ `
    type Query { ok: Boolean }
    type Mutation { touch(id: ID!): Boolean }
    type Head { name: String }
    type HeadChange { id: ID! head: Head }
    type Subscription { headChanged(id: ID!): HeadChange! }
  `,
  resolvers: {
    Query: { ok: () => true },
    Mutation: {
      touch: (_: unknown, { id }: { id: string }) => {
        pubsub.publish('headChanged', id, { id });
        return true;
      },
    },
    HeadChange: {
      head: async ({ id }: { id: string }) => {
        const response = await fetch(`${upstream}/head/${id}`);
        const [head] = (await response.json()) as { name: string }[];
        return head ?? null;
      },
    },
    Subscription: {
      headChanged: {
        subscribe: (_: unknown, { id }: { id: string }) => pubsub.subscribe('headChanged', id),
        resolve: (change: { id: string }) => change,
      },
    },
  },
});

const yoga = createYoga({ schema, logging: false, graphiql: false });
const server = createServer(yoga);

// WebSocket as yoga's docs wire it (graphql-ws's useServer, each subscription run through yoga's envelop).
useServer(
  {
    execute: (args: any) => args.rootValue.execute(args),
    subscribe: (args: any) => args.rootValue.subscribe(args),
    onSubscribe: async (ctx: any, _id: string, params: any) => {
      const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
        ...ctx,
        req: ctx.extra.request,
        socket: ctx.extra.socket,
        params,
      });
      const args = {
        schema,
        operationName: params.operationName,
        document: parse(params.query),
        variableValues: params.variables,
        contextValue: await contextFactory(),
        rootValue: { execute, subscribe },
      };
      const errors = validate(args.schema, args.document);
      return errors.length > 0 ? errors : args;
    },
  },
  new WebSocketServer({ server, path: yoga.graphqlEndpoint }),
);
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`Yoga listening on http://${process.env.HOST ?? '127.0.0.1'}:${port}/graphql\n`);
});
process.on('SIGINT', () => server.close(() => process.exit(0)));

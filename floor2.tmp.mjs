import { createServer } from 'node:http';
import { createYoga, createSchema } from 'graphql-yoga';
import { Pool } from 'undici';
const pool = new Pool('http://127.0.0.1:8181', { connections: 100 });
const mode = process.argv[2];
const resolvers = { Query: { hello: async (_, { id }) => {
  const { body } = await pool.request({ method: 'GET', path: `/v2/heads/${id}/ext`, headers: { accept: 'application/json' } });
  const h = await body.json();
  return { name: h.name, url: h.url, createdAt: h.created_at, hair: h.hair };
} } };
const yoga = createYoga({ schema: createSchema({ typeDefs: 'type Query { hello(id: ID!): H } type H { name: String url: String createdAt: String hair: Hair } type Hair { name: String url: String }', resolvers }), logging: false, landingPage: false, graphiql: false, maxRequestBodySize: false });
createServer(yoga).listen(8183, '127.0.0.1', () => console.log('up'));

import type { Server } from 'node:http';
import type { ConnectionSettings } from '../../config.js';
import { capConnections, createDrainableServer, slowRequestOptions } from '../http/http-server.js';
import { pathOf } from '../http/paths.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { type ProbeSources, probeAnswer } from './answers.js';

const notFound = JSON.stringify({ status: 'not found' });

/**
 * The admin port (ADMIN_PORT): `/health`, `/ready` and `/metrics` on a server of their own, as
 * Apollo Router and Envoy serve theirs, so that probes and scrapes are still answered while the
 * public port has all the connections MAX_CONNECTIONS allows. The answers are the public port's
 * (probes/answers.ts); nothing else is served. Its connections have a small cap of their own and the same
 * slow-request timeouts, so a flood of this port cannot take the descriptors either.
 */
export function createAdminServer(
  sources: ProbeSources & { readonly metrics: Pick<GatewayMetrics, 'watchConnections'> },
  connections: ConnectionSettings,
): Server {
  const server = createDrainableServer(slowRequestOptions(connections), (request, response) => {
    // Probes ask in origin form (`/ready?x`); anything else is not a probe.
    const path = pathOf(request.url ?? '/');
    const answer = request.method === 'GET' || request.method === 'HEAD' ? probeAnswer(path, sources) : undefined;
    if (answer === undefined) {
      response.writeHead(404, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(notFound),
      });
      response.end(notFound);
      return;
    }
    void Promise.resolve(answer).then(({ status, headers, body }) => {
      response.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
      response.end(body);
    });
  });
  capConnections(server, connections.adminMaxConnections, sources.metrics.watchConnections(server, 'admin'));
  return server;
}

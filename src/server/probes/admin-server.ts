import type { Server } from 'node:http';
import type { ConnectionSettings } from '../../config.js';
import { capConnections, createDrainableServer, slowRequestOptions } from '../http/http-server.js';
import { pathOf } from '../http/paths.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import type { StatusPage } from '../status/page.js';
import { type ProbeAnswer, type ProbeSources, probeOrStatus } from './answers.js';

const notFound: ProbeAnswer = {
  status: 404,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  body: JSON.stringify({ status: 'not found' }),
};

/**
 * ADMIN_PORT: probes answered (as Apollo Router's and Envoy's) while the public port has all MAX_CONNECTIONS, and the
 * status page (STATUS_PAGE).
 */
export function createAdminServer(
  sources: ProbeSources & {
    readonly metrics: Pick<GatewayMetrics, 'watchConnections'>;
    readonly status?: StatusPage | undefined;
  },
  connections: ConnectionSettings,
): Server {
  const server = createDrainableServer(slowRequestOptions(connections), (request, response) => {
    // Probes ask in origin form (`/ready?x`); anything else is not a probe.
    const answer = probeOrStatus(request.method, pathOf(request.url ?? '/'), sources, sources.status);
    void Promise.resolve(answer ?? notFound).then(({ status, headers, body }) => {
      response.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
      response.end(body);
    });
  });
  capConnections(server, connections.adminMaxConnections, sources.metrics.watchConnections(server, 'admin'));
  return server;
}

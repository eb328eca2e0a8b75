import { loadConfig } from '../src/config.js';
import { buildGateway } from '../src/server/gateway.js';
import { createLogger } from '../src/server/instruments/logger.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
const built = buildGateway(loadConfig({ RATE_LIMIT_REQUESTS_PER_SECOND: '10', RATE_LIMIT_IN_FLIGHT: '5', RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '100', RESPONSE_CACHE_TTL_MS: '1000', CORS_ORIGINS: 'https://a.example', CSRF_PREVENTION: 'true', NODE_ENV: 'production', UPSTREAM_URL: 'http://x/v2' }), 'http://127.0.0.1:1/v2', { logger: createLogger({ level: 'silent' }), metrics: new GatewayMetrics({ defaultMetrics: false }) });
console.log(JSON.stringify(built.pipeline.stages, null, 1));
const d = buildGateway(loadConfig({}), 'http://127.0.0.1:1/v2', { logger: createLogger({ level: 'silent' }), metrics: new GatewayMetrics({ defaultMetrics: false }) });
console.log(JSON.stringify(d.pipeline.stages));
process.exit(0);

import { z } from 'zod';
import { samplerNames } from '../telemetry/tracing.js';
import { setting } from './places.js';
import { expecting, flag, httpUrl, integer, names, oneOf, ratio, variableDocs } from './values.js';

/*
 * Observability in the environment: what `/metrics` keeps apart (operations, clients, schema
 * usage), the logs (pino's level, the operation log line) and tracing (OpenTelemetry's exporter
 * and sampler).
 */

/** What `/metrics` keeps apart, and the schema's usage. */
export const metrics = {
  METRICS_OPERATION_NAMES: setting('metricsOperations.max', integer(1, 100_000).default(500)).register(variableDocs, {
    description:
      "operation names `/metrics` keeps apart besides the known ones (the manifest's, `METRICS_KNOWN_OPERATIONS`): the first seen; the rest are `other`",
  }),
  METRICS_KNOWN_OPERATIONS: names(/^[_A-Za-z][_0-9A-Za-z]*$/, 'a comma-separated list of GraphQL operation names')
    .optional()
    .register(variableDocs, {
      unset: 'none',
      description:
        "operation names `/metrics` always keeps apart, beside the trusted-documents manifest's; the others share `METRICS_OPERATION_NAMES`",
    }),
  METRICS_CLIENT_NAMES: setting('metricsClients.maxNames', integer(1, 10_000).default(50)).register(variableDocs, {
    description:
      'client app names (`apollographql-client-name` or `graphql-client-name`) `/metrics` keeps apart, the first seen; the rest are `other` (see [client awareness](docs/operations.md#client-awareness))',
  }),
  METRICS_KNOWN_CLIENTS: names(
    /^[\w .:/@+()-]{1,64}$/,
    'a comma-separated list of client app names (letters, digits, space and _ . : / @ + ( ) -, at most 64 each)',
  )
    .optional()
    .register(variableDocs, {
      unset: 'none',
      description: 'client app names `/metrics` always keeps apart; the others share `METRICS_CLIENT_NAMES`',
    }),
  METRICS_CLIENT_VERSIONS: setting('metricsClients.maxVersions', integer(1, 1_000).default(10)).register(variableDocs, {
    description: 'client versions `/metrics` keeps apart under each client name, the first seen; the rest are `other`',
  }),
  METRICS_SCHEMA_USAGE: setting('schemaUsage', flag().default(true)).register(variableDocs, {
    description:
      "count the schema coordinates each operation selects, by client (`gateway_schema_coordinate_uses_total`, what `npm run schema:check -- --usage` reads), and log a client's use of a `@deprecated` field or argument at most once a minute; `false`: neither (see [schema usage](docs/operations.md#schema-usage))",
  }),
};

/** What is logged. */
export const logs = {
  LOG_LEVEL: setting(
    'logLevel',
    oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ).register(variableDocs, { description: "pino's level: what is logged" }),
  OPERATION_LOG: setting('operationLog.which', oneOf(['failures', 'all', 'off']).default('failures')).register(
    variableDocs,
    {
      description:
        'which GraphQL operations get a `graphql operation` log line (at `info`): `failures`, those refused, failed or slower than `OPERATION_LOG_SLOW_MS` (not those open upstream breakers refused whole); `all`, every one; `off`, none. The metrics and spans count every operation whatever this says (see [logs](docs/operations.md#logs))',
    },
  ),
  OPERATION_LOG_SLOW_MS: setting('operationLog.slowMs', integer(0, 3_600_000).default(1_000)).register(variableDocs, {
    description:
      'with `OPERATION_LOG=failures`, an operation that took this long or longer is logged even when it succeeded',
  }),
};

/** Where spans go, and which traces are recorded. */
export const tracing = {
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl('an http(s) URL of an OTLP/HTTP receiver').optional().register(variableDocs, {
    unset: 'unset: no spans recorded',
    description:
      'OTLP/HTTP receiver (a collector) for traces; spans go to `<endpoint>/v1/traces` (see [tracing](docs/operations.md#tracing))',
  }),
  // The spec's default; grpc would need another exporter (and HTTP/2), not offered.
  OTEL_EXPORTER_OTLP_PROTOCOL: setting(
    'tracing.protocol',
    oneOf(['http/protobuf', 'http/json']).default('http/protobuf'),
  ).register(variableDocs, { description: 'how spans are encoded for the receiver (grpc is not offered)' }),
  OTEL_SERVICE_NAME: setting(
    'tracing.serviceName',
    expecting(z.string(), 'any text').default('avatar-head-gateway'),
  ).register(variableDocs, { description: 'the `service.name` of the spans' }),
  OTEL_TRACES_SAMPLER: setting('tracing.sampler', oneOf(samplerNames).default('parentbased_always_on')).register(
    variableDocs,
    { description: "which traces are recorded, by the OpenTelemetry SDK's samplers" },
  ),
  OTEL_TRACES_SAMPLER_ARG: setting('tracing.samplerRatio', ratio().default(1)).register(variableDocs, {
    description: 'the ratio of the `traceidratio` samplers',
  }),
};

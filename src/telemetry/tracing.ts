import { createRequire } from 'node:module';
import {
  type Attributes,
  type Context,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  type TextMapGetter,
  type TextMapSetter,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { setGlobalErrorHandler, W3CTraceContextPropagator } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  RandomIdGenerator,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';

/** The samplers of the OpenTelemetry SDK that OTEL_TRACES_SAMPLER names (the spec's names). */
export const samplerNames = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof samplerNames)[number];

/** OpenTelemetry tracing, from the standard OTEL_* variables. */
export interface TracingSettings {
  /**
   * Where spans are exported (OTLP over HTTP: OTEL_EXPORTER_OTLP_ENDPOINT with the spec's
   * `v1/traces` appended). Undefined: spans are not recorded, but upstream calls still carry a
   * `traceparent` of their own.
   */
  readonly tracesUrl: string | undefined;
  readonly protocol: 'http/protobuf' | 'http/json';
  readonly serviceName: string;
  readonly sampler: SamplerName;
  /** The ratio of the `traceidratio` samplers (OTEL_TRACES_SAMPLER_ARG); the others ignore it. */
  readonly samplerRatio: number;
}

const require = createRequire(import.meta.url);

/**
 * OpenTelemetry's stable attribute names, from the CommonJS build that the SDK loads: an `import`
 * resolves to the package's ES build, a second copy of its 700 KB of constants (1 MB of memory).
 */
export const semconv =
  require('@opentelemetry/semantic-conventions') as typeof import('@opentelemetry/semantic-conventions');

/** What the gateway needs of a tracer: spans started under an explicit parent context. */
export type SpanStarter = Pick<Tracer, 'startSpan'>;

/**
 * The gateway's tracing: spans begin in three places (the operation, its plan, each upstream call
 * attempt) and pass their context explicitly (GatewayContext.trace, CallContext.trace). No
 * context manager: Node 20's AsyncLocalStorage hooks every promise, a cost paid per resolver.
 */
/** Request headers as the gateway reads them: a fetch `Headers`, or Node's through an adapter. */
export interface HeaderReader {
  get(name: string): string | null;
  keys(): Iterable<string>;
}

export interface Tracing {
  readonly tracer: SpanStarter;
  /** Spans are recorded and exported (OTEL_EXPORTER_OTLP_ENDPOINT is set). */
  readonly recording: boolean;
  /** The caller's trace from its `traceparent` (and `tracestate`); the root context without one. */
  extract(headers: HeaderReader): Context;
  /** Names `span` as the parent in outgoing headers (`traceparent`, `tracestate`). */
  inject(span: Span, headers: Record<string, string>): void;
  /** Exports the spans still buffered. */
  flush(): Promise<void>;
  /** Exports the spans still buffered and stops exporting; for graceful shutdown. */
  shutdown(): Promise<void>;
}

/**
 * Span attribute names. `graphql.operation.*` and `url.template` are OpenTelemetry's semantic
 * conventions still marked incubating, so copied here as the semconv package advises;
 * `gateway.*` are ours.
 */
export const spanAttributes = Object.freeze({
  operationName: 'graphql.operation.name',
  operationType: 'graphql.operation.type',
  /**
   * The client app, as it names itself (apollographql-client-name or graphql-client-name): no OpenTelemetry convention
   * yet; Apollo's router says `apollo.client.*`, Hive's gateway `hive.client.*`.
   */
  clientName: 'graphql.client.name',
  clientVersion: 'graphql.client.version',
  outcome: 'gateway.operation.outcome',
  errorCodes: 'gateway.operation.error_codes',
  upstreamCalls: 'gateway.operation.upstream_calls',
  /**
   * The limit that refused the operation, as its `extensions.limit` names it (depth, aliases, body, budget, requests,
   * …).
   */
  refusedBy: 'gateway.operation.refused_by',
  planCalls: 'gateway.plan.calls',
  planExact: 'gateway.plan.exact',
  upstreamOperation: 'gateway.upstream.operation',
  attempt: 'gateway.upstream.attempt',
  retried: 'gateway.upstream.retried',
  urlTemplate: 'url.template',
});

const samplers: Readonly<Record<SamplerName, (ratio: number) => Sampler>> = {
  always_on: () => new AlwaysOnSampler(),
  always_off: () => new AlwaysOffSampler(),
  traceidratio: (ratio) => new TraceIdRatioBasedSampler(ratio),
  parentbased_always_on: () => new ParentBasedSampler({ root: new AlwaysOnSampler() }),
  parentbased_always_off: () => new ParentBasedSampler({ root: new AlwaysOffSampler() }),
  parentbased_traceidratio: (ratio) => new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) }),
};

const headersGetter: TextMapGetter<HeaderReader> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

const recordSetter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

const noAttributes: Attributes = Object.freeze({});
const noLinks: Link[] = [];

/**
 * Spans when nothing is exported: none is recorded, yet each has a real span id (the SDK's id
 * generator), its parent's trace id (or a new one) and the configured sampler's decision, so an
 * upstream call's `traceparent` names a span of its own in the caller's trace and the upstream
 * samples as the gateway would have. The SDK's tracer would record every sampled span (a span
 * object, its attributes and clock readings) even without a processor to hand it to.
 */
class UnrecordedSpans implements SpanStarter {
  readonly #ids = new RandomIdGenerator();

  constructor(private readonly sampler: Sampler) {}

  startSpan(name: string, options: SpanOptions = {}, parent: Context = ROOT_CONTEXT): Span {
    const parentSpan = trace.getSpanContext(parent);
    const traceId =
      parentSpan !== undefined && isSpanContextValid(parentSpan) ? parentSpan.traceId : this.#ids.generateTraceId();
    const sampling = this.sampler.shouldSample(
      parent,
      traceId,
      name,
      options.kind ?? SpanKind.INTERNAL,
      noAttributes,
      noLinks,
    );
    return trace.wrapSpanContext({
      traceId,
      spanId: this.#ids.generateSpanId(),
      traceFlags: sampling.decision === SamplingDecision.RECORD_AND_SAMPLED ? TraceFlags.SAMPLED : TraceFlags.NONE,
      traceState: sampling.traceState ?? parentSpan?.traceState,
    });
  }
}

/**
 * Tracing as configured: with a traces URL, the OpenTelemetry SDK's tracer, its batch processor
 * (OTEL_BSP_* tune it) and the OTLP/HTTP exporter of the configured protocol; without one, spans
 * that only carry ids to the upstream.
 */
export function createTracing(settings: TracingSettings): Tracing {
  const propagator = new W3CTraceContextPropagator();
  const sampler = samplers[settings.sampler](settings.samplerRatio);
  const common = {
    extract: (headers: HeaderReader) => propagator.extract(ROOT_CONTEXT, headers, headersGetter),
    inject: (span: Span, headers: Record<string, string>) =>
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, recordSetter),
  };
  if (settings.tracesUrl === undefined) {
    return {
      ...common,
      tracer: new UnrecordedSpans(sampler),
      recording: false,
      flush: async () => {},
      shutdown: async () => {},
    };
  }
  // Loaded only when spans are exported: the exporters and what they pull in (the OTLP
  // serializers, the metrics SDK, the logs API) are some 2 MB of RSS a gateway without an endpoint
  // does not need. (These packages resolve to CommonJS for `import` too: one copy either way.)
  const { OTLPTraceExporter: Exporter } = (
    settings.protocol === 'http/json'
      ? require('@opentelemetry/exporter-trace-otlp-http')
      : require('@opentelemetry/exporter-trace-otlp-proto')
  ) as typeof import('@opentelemetry/exporter-trace-otlp-proto');
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: settings.serviceName })),
    sampler,
    spanProcessors: [new BatchSpanProcessor(new Exporter({ url: settings.tracesUrl }))],
  });
  return {
    ...common,
    tracer: provider.getTracer(settings.serviceName),
    recording: true,
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

/**
 * The SDK reports a failed export to its global error handler, which by default says nothing:
 * a warning line instead (the message only; never a stack). Process-wide, so main.ts sets it.
 */
export function logExportFailures(logger: Logger): void {
  setGlobalErrorHandler((error) =>
    logger.warn({ error: error instanceof Error ? error.message : String(error) }, 'trace export failed'),
  );
}

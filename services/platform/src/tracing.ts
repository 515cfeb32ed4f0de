// Distributed tracing with OpenTelemetry. Off unless the standard variables ask for it:
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, OTEL_SDK_DISABLED not true
// and OTEL_TRACES_EXPORTER not "none"; then spans are exported with OTLP over HTTP, batched, and the
// SDK reads the other OTEL_* variables itself (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS, …). Off, nothing is loaded and the
// adapters skip tracing altogether (one boolean test per call), so it costs nothing.
//
// Context travels as W3C trace context (`traceparent`, `tracestate`): in gRPC metadata between
// services, and at the edge from a trusted proxy only. Spans are made once, in the adapters: the
// gateway's request, each gRPC client and server call, each database statement.
import {
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type Tracer,
} from "@opentelemetry/api";

let enabled = false;
/** How long stopping waits for the last spans to be exported. */
const SHUTDOWN_FLUSH_MS = 2_000;
let activeTracer: Tracer | undefined;
let stopping: (() => Promise<void>) | undefined;

/** Whether spans are being made and exported in this process. */
export function tracingEnabled(): boolean {
  return enabled;
}

/** Whether the environment asks for tracing (the standard OTEL_* variables). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (/^true$/i.test(env.OTEL_SDK_DISABLED ?? "")) return false;
  if (
    (env.OTEL_TRACES_EXPORTER ?? "otlp")
      .split(",")
      .map((e) => e.trim())
      .every((e) => e === "none")
  )
    return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts tracing for this process when the environment asks for it (once; later calls return the
 * same stop). Returns the function that flushes and stops the exporter.
 */
export async function startTracing(
  serviceName: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<() => Promise<void>> {
  if (stopping) return stopping;
  if (!tracingConfigured(env)) return (stopping = async () => {});
  const [
    { BasicTracerProvider, BatchSpanProcessor },
    { OTLPTraceExporter },
    { resourceFromAttributes, detectResources, envDetector },
    { AsyncLocalStorageContextManager },
    { W3CTraceContextPropagator },
  ] = await Promise.all([
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/core"),
  ]);
  // OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES override the process's own name.
  const resource = resourceFromAttributes({ "service.name": serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  activeTracer = trace.getTracer("switchyard");
  enabled = true;
  return (stopping = async () => {
    enabled = false;
    // Flushes what is batched; a collector that does not answer does not hold up the exit for long.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      provider.shutdown().catch(() => {}),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS))),
    ]);
    clearTimeout(timer);
  });
}

export function tracer(): Tracer {
  return activeTracer ?? trace.getTracer("switchyard");
}

/** The trace id of the span active here, if tracing is on and there is one. */
export function activeTraceId(): string | undefined {
  if (!enabled) return undefined;
  const span = trace.getSpan(context.active());
  return span?.spanContext().traceId;
}

/** The trace context a carrier (headers, metadata) brings, or a fresh root. */
export function extractContext<C>(carrier: C, getter: TextMapGetter<C>): Context {
  return propagation.extract(ROOT_CONTEXT, carrier, getter);
}

/** Writes the trace context of `span` into a carrier (traceparent, tracestate). */
export function injectContext(span: Span, set: (key: string, value: string) => void): void {
  propagation.inject(trace.setSpan(context.active(), span), undefined, {
    set: (_carrier, key, value) => set(key, value),
  });
}

export { context, trace, SpanKind, SpanStatusCode, ROOT_CONTEXT } from "@opentelemetry/api";
export type { Context, Span } from "@opentelemetry/api";

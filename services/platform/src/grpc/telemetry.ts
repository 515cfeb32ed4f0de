// Metrics, spans and the request id of gRPC calls, made once here for every call the adapters serve
// or make: the server adapter and the client call into this, handlers never do.
import { Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import type { DescMethod } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { currentRequestId } from "../call-deadline.js";
import { rpcClientDuration, rpcServerDuration, rpcServerStreams } from "../metrics.js";
import { acceptedRequestId, newRequestId, REQUEST_ID_HEADER } from "../request-id.js";
import { context, extractContext, injectContext, SpanKind, SpanStatusCode, trace, tracer, tracingEnabled, type Context, type Span } from "../tracing.js";

/** The canonical gRPC code name of a call's outcome (OK for none). */
export function grpcCodeOf(err: unknown): string {
  if (err === undefined) return "OK";
  const code = err instanceof ConnectError ? (err.code as number) : GrpcStatus.INTERNAL;
  return GrpcStatus[code] ?? "UNKNOWN";
}

const metadataGetter = {
  get: (carrier: Metadata, key: string) => {
    const v = carrier.get(key)[0];
    return typeof v === "string" ? v : undefined;
  },
  keys: (carrier: Metadata) => Object.keys(carrier.getMap()),
};

function endSpan(span: Span, code: string, err: unknown): void {
  span.setAttribute("rpc.grpc.status_code", GrpcStatus[code as keyof typeof GrpcStatus] as number);
  if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  span.end();
}

export interface ServerCallTelemetry {
  /** The call's request id: the caller's, or a new one. */
  readonly requestId: string;
  /** Runs the call's work with its span active (when tracing). */
  run<T>(work: () => T): T;
  /** The call ended: OK (undefined) or with this error. */
  end(err: unknown): void;
}

/** Per method: its metric children, looked up once. */
export function serverTelemetry(method: DescMethod) {
  const service = method.parent.typeName;
  const streaming = method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming";
  const spanName = `${service}/${method.name}`;
  const byCode = new Map<string, { observe(v: number): void } | { inc(): void }>();
  const child = (code: string) => {
    let c = byCode.get(code);
    if (!c) {
      const labels = { rpc_service: service, rpc_method: method.name, grpc_code: code };
      c = streaming ? rpcServerStreams.labels(labels) : rpcServerDuration.labels(labels);
      byCode.set(code, c);
    }
    return c;
  };
  return (metadata: Metadata): ServerCallTelemetry => {
    const started = performance.now();
    const requestId = acceptedRequestId(metadata.get(REQUEST_ID_HEADER)[0]) ?? newRequestId();
    let span: Span | undefined;
    let spanContext: Context | undefined;
    if (tracingEnabled()) {
      const parent = extractContext(metadata, metadataGetter);
      span = tracer().startSpan(spanName, { kind: SpanKind.SERVER, attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method.name, "switchyard.request_id": requestId } }, parent);
      spanContext = trace.setSpan(parent, span);
    }
    let ended = false;
    return {
      requestId,
      run: (work) => (spanContext ? context.with(spanContext, work) : work()),
      end(err) {
        if (ended) return;
        ended = true;
        const code = grpcCodeOf(err);
        const c = child(code);
        if ("observe" in c) c.observe((performance.now() - started) / 1000);
        else c.inc();
        if (span) endSpan(span, code, err);
      },
    };
  };
}

export interface ClientCallTelemetry {
  /** The call ended: OK (undefined) or with this error. */
  end(err: unknown): void;
}

const NOTHING: ClientCallTelemetry = { end() {} };

/**
 * An outgoing call: passes the request id of the call it is made within (unless the caller set one)
 * and, when tracing, the trace context of a client span; unary calls are timed.
 */
export function clientTelemetry(method: DescMethod) {
  const service = method.parent.typeName;
  const timed = method.methodKind === "unary";
  const spanName = `${service}/${method.name}`;
  const byCode = new Map<string, { observe(v: number): void }>();
  return (metadata: Metadata): ClientCallTelemetry => {
    if (metadata.get(REQUEST_ID_HEADER).length === 0) {
      const requestId = currentRequestId();
      if (requestId !== undefined) metadata.set(REQUEST_ID_HEADER, requestId);
    }
    let span: Span | undefined;
    if (tracingEnabled()) {
      span = tracer().startSpan(spanName, { kind: SpanKind.CLIENT, attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method.name } });
      injectContext(span, (key, value) => metadata.set(key, value));
    }
    if (!timed && !span) return NOTHING;
    const started = performance.now();
    let ended = false;
    return {
      end(err) {
        if (ended) return;
        ended = true;
        const code = grpcCodeOf(err);
        if (timed) {
          let c = byCode.get(code);
          if (!c) byCode.set(code, (c = rpcClientDuration.labels({ rpc_service: service, rpc_method: method.name, grpc_code: code })));
          c.observe((performance.now() - started) / 1000);
        }
        if (span) endSpan(span, code, err);
      },
    };
  };
}

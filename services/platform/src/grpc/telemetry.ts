// Metrics and spans of the gRPC calls a process makes, made once here for every call:
// the client calls into this, handlers never do. (Those of the calls it serves are the server chain's:
// interceptors/telemetry.ts.)
import { Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import type { DescMethod } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { rpcClientDuration } from "../metrics.js";
import { injectContext, SpanKind, SpanStatusCode, tracer, tracingEnabled, type Span } from "../tracing.js";

/** The canonical gRPC code name of a call's outcome (OK for none). */
export function grpcCodeOf(err: unknown): string {
  if (err === undefined) return "OK";
  const code = err instanceof ConnectError ? (err.code as number) : GrpcStatus.INTERNAL;
  return GrpcStatus[code] ?? "UNKNOWN";
}

/** Ends a call's span with its gRPC code (OK for none). */
export function endSpan(span: Span, code: string, err: unknown): void {
  span.setAttribute("rpc.grpc.status_code", GrpcStatus[code as keyof typeof GrpcStatus]);
  if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  span.end();
}

export interface ClientCallTelemetry {
  /** The call ended: OK (undefined) or with this error. */
  end(err: unknown): void;
}

const NOTHING: ClientCallTelemetry = { end() {} };

/**
 * An outgoing call: when tracing, the trace context of a client span; unary calls are timed. (The
 * request id and priority of the call it is made for are the caller's to pass on: call-deadline.ts's passedOn.)
 */
export function clientTelemetry(method: DescMethod) {
  const service = method.parent.typeName;
  const timed = method.methodKind === "unary";
  const spanName = `${service}/${method.name}`;
  const byCode = new Map<string, { observe(v: number): void }>();
  return (metadata: Metadata): ClientCallTelemetry => {
    let span: Span | undefined;
    if (tracingEnabled()) {
      span = tracer().startSpan(spanName, {
        kind: SpanKind.CLIENT,
        attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method.name },
      });
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
          if (!c)
            byCode.set(
              code,
              (c = rpcClientDuration.labels({ rpc_service: service, rpc_method: method.name, grpc_code: code })),
            );
          c.observe((performance.now() - started) / 1000);
        }
        if (span) endSpan(span, code, err);
      },
    };
  };
}

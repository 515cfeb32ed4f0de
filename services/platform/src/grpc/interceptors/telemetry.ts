// What every call served leaves behind, made here once for all of them: its duration (or, for a stream,
// its end) by gRPC code in the metrics, its server span when tracing (the caller's trace continued),
// and its log lines — a failure always (the observer decides how loud), an answer at debug level.
import type { Metadata } from "@grpc/grpc-js";
import type { DescMethod } from "@bufbuild/protobuf";
import { rpcServerDuration, rpcServerStreams } from "../../metrics.js";
import { extractContext, SpanKind, trace, tracer, tracingEnabled, type Span } from "../../tracing.js";
import { context as traceContext } from "../../tracing.js";
import { metadataOf, requestIdOf } from "../handler-context.js";
import { endSpan, grpcCodeOf } from "../telemetry.js";
import { settle, streamsAnswers, type Interceptor, type ServiceInterceptor } from "./chain.js";

/** What the server wants to hear about finished calls (its logs). */
export interface RpcObserver {
  /** A call failed with this error. */
  failed(err: unknown, method: DescMethod, requestId: string): void;
  /** A unary call answered OK after `ms` milliseconds. */
  answered?(method: DescMethod, ms: number, requestId: string): void;
}

const metadataGetter = {
  get: (carrier: Metadata, key: string) => {
    const v = carrier.get(key)[0];
    return typeof v === "string" ? v : undefined;
  },
  keys: (carrier: Metadata) => Object.keys(carrier.getMap()),
};

export function telemetry(observer: RpcObserver): ServiceInterceptor {
  return (method) => methodTelemetry(method, observer);
}

function methodTelemetry(method: DescMethod, observer: RpcObserver): Interceptor {
  const service = method.parent.typeName;
  const streaming = streamsAnswers(method);
  const spanName = `${service}/${method.name}`;
  // The method's metric children, looked up once per code.
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
  const record = (err: unknown, started: number, span: Span | undefined) => {
    const code = grpcCodeOf(err);
    const c = child(code);
    if ("observe" in c) c.observe((performance.now() - started) / 1000);
    else c.inc();
    if (span) endSpan(span, code, err);
  };
  const answeredLog = method.methodKind === "unary" ? observer.answered : undefined;

  return (next) => (call) => {
    const started = performance.now();
    let span: Span | undefined;
    const answered = (answer: unknown) => {
      record(undefined, started, span);
      answeredLog?.(method, performance.now() - started, requestIdOf(call.context));
      return answer;
    };
    const failed = (err: unknown) => {
      record(err, started, span);
      observer.failed(err, method, requestIdOf(call.context));
      throw err;
    };
    if (!tracingEnabled()) return settle(next, call, answered, failed);
    const metadata = metadataOf(call.context);
    const parent = metadata ? extractContext(metadata, metadataGetter) : traceContext.active();
    const attributes = {
      "rpc.system": "grpc",
      "rpc.service": service,
      "rpc.method": method.name,
      "switchyard.request_id": requestIdOf(call.context),
    };
    span = tracer().startSpan(spanName, { kind: SpanKind.SERVER, attributes }, parent);
    // The rest of the call — its log lines, the calls it makes — runs with its span active.
    return traceContext.with(trace.setSpan(parent, span), settle, undefined, next, call, answered, failed);
  };
}

// What the edge records of every request, once, around the request pipeline: its request id (a trusted
// proxy's x-request-id, else a new one; the pipeline returns it on the answer and passes it to every hop), its span
// (W3C traceparent taken from a trusted proxy only, else a new trace), one access-log line, and the
// request metrics by method, route template and status class. Label values are bounded: the route is
// the OpenAPI path template (or one of the fixed paths, else "unmatched"), never the raw path.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "@switchyard/platform/logger.js";
import {
  gatewayCacheResults,
  gatewayRateLimited,
  gatewayStreamsOpened,
  httpRequestDuration,
  statusClass,
} from "@switchyard/platform/metrics.js";
import { acceptedRequestId, newRequestId, REQUEST_ID_HEADER } from "@switchyard/platform/request-id.js";
import {
  context,
  extractContext,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  tracer,
  tracingEnabled,
  type Span,
} from "@switchyard/platform/tracing.js";

/** Paths outside the API's document that are their own route (and /docs/… is one: the API reference). */
const FIXED_ROUTES = new Set(["/healthz", "/readyz", "/versions", "/metrics"]);

/** A client that went away before any answer was sent (nginx's convention). */
const CLIENT_CLOSED = 499;

export interface RequestRecord {
  readonly requestId: string;
  /** The route template, once the router found the operation. */
  route: string | undefined;
  /** Which quota refused it, when the gateway answered 429 itself. */
  quotaKind: "user" | "address" | "streams" | undefined;
  /** The answer is a live stream (text/event-stream): it lasts minutes, so it is counted apart from the latencies. */
  eventStream: boolean;
  /** The edge cache's part in the answer, on cacheable routes (edge-cache.ts). */
  cache: CacheResult | undefined;
  /** Runs the request's work with its span active (when tracing). */
  run<A extends unknown[], T>(work: (...args: A) => T, ...args: A): T;
  /** Called once when the response closes (finished or not), before it is recorded: one listener per response, not two. */
  onClose: (() => void) | undefined;
}

/** hit: answered from memory; miss: read upstream and kept; bypass: read upstream, the cache not answering. */
export type CacheResult = "hit" | "miss" | "bypass";

const headerGetter = {
  get: (carrier: IncomingMessage["headers"], key: string) => carrier[key],
  keys: (carrier: IncomingMessage["headers"]) => Object.keys(carrier),
};

/** The request id a request gets: a trusted proxy's (well-formed) one, else a new one. */
export function requestIdOf(req: IncomingMessage, trustedProxyHops: number): string {
  return (trustedProxyHops > 0 ? acceptedRequestId(req.headers[REQUEST_ID_HEADER]) : undefined) ?? newRequestId();
}

const durationChildren = new Map<string, { observe(v: number): void }>();
function observeDuration(method: string, route: string, status: number, seconds: number): void {
  const cls = statusClass(status);
  const key = `${method} ${route} ${cls}`;
  let child = durationChildren.get(key);
  if (!child) durationChildren.set(key, (child = httpRequestDuration.labels({ method, route, status_class: cls })));
  child.observe(seconds);
}

const cacheChildren = new Map<string, { inc(): void }>();
function cacheCounter(result: CacheResult, route: string): { inc(): void } {
  const key = `${result} ${route}`;
  let child = cacheChildren.get(key);
  if (!child) cacheChildren.set(key, (child = gatewayCacheResults.labels({ result, route })));
  return child;
}

function pathOf(url: string | undefined): string {
  const u = url ?? "/";
  const q = u.indexOf("?");
  return q === -1 ? u : u.slice(0, q);
}

/** How the server observes its requests, the same for each. */
export interface RequestObserving {
  /** Proxies in front whose request id and trace context are taken (0: none). */
  trustedProxyHops: number;
  logger: Logger;
  /** Whether every request gets an access log line. */
  accessLog: boolean;
}

export function observeRequest(req: IncomingMessage, res: ServerResponse, observing: RequestObserving): RequestRecord {
  const { trustedProxyHops, logger, accessLog } = observing;
  const started = performance.now();
  const method = req.method ?? "GET";
  const requestId = requestIdOf(req, trustedProxyHops);
  const socket = req.socket;
  const bytesBefore = socket.bytesWritten;
  let span: Span | undefined;
  let spanContext: ReturnType<typeof trace.setSpan> | undefined;
  if (tracingEnabled()) {
    // Only what the trusted proxy sent continues its trace; a client's own traceparent is not trusted.
    const parent = trustedProxyHops > 0 ? extractContext(req.headers, headerGetter) : ROOT_CONTEXT;
    span = tracer().startSpan(
      method,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": method, "switchyard.request_id": requestId } },
      parent,
    );
    spanContext = trace.setSpan(parent, span);
  }
  const record: RequestRecord = {
    requestId,
    route: undefined,
    quotaKind: undefined,
    eventStream: false,
    cache: undefined,
    run: (work, ...args) => (spanContext ? context.with(spanContext, work, undefined, ...args) : work(...args)),
    onClose: undefined,
  };
  res.once("close", () => {
    record.onClose?.();
    const status = !res.headersSent && !res.writableFinished ? CLIENT_CLOSED : res.statusCode;
    const path = record.route === undefined ? pathOf(req.url) : undefined;
    const route =
      record.route ??
      (FIXED_ROUTES.has(path!) ? path! : path === "/docs" || path!.startsWith("/docs/") ? "/docs" : "unmatched");
    const seconds = (performance.now() - started) / 1000;
    // A live stream lasts minutes: counted apart, not in the latency histogram.
    if (record.eventStream) gatewayStreamsOpened.labels({ route }).inc();
    else observeDuration(method, route, status, seconds);
    // A quota's refusal, whatever the status says it with (gRPC-Web refuses in a 200's trailers); any
    // other 429 is identity's failed-login throttle, passed on.
    const refusedBy = record.quotaKind ?? (status === 429 ? "login" : undefined);
    if (refusedBy) gatewayRateLimited.labels({ kind: refusedBy }).inc();
    if (record.cache) cacheCounter(record.cache, route).inc();
    const traceId = span?.spanContext().traceId;
    if (span) {
      span.setAttribute("http.route", route);
      span.setAttribute("http.response.status_code", status);
      span.updateName(`${method} ${route}`);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
    if (accessLog) {
      const line: Record<string, unknown> = {
        request_id: requestId,
        method,
        route,
        status,
        ms: Math.round(seconds * 10_000) / 10,
        bytes: socket.bytesWritten - bytesBefore,
      };
      if (traceId) line.trace_id = traceId;
      if (record.cache) line.cache = record.cache;
      logger.info(line, "request");
    }
  });
  return record;
}

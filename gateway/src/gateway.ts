// The public edge: an HTTP server that routes and validates every /v1 request from the OpenAPI
// document, authenticates it, and translates it into gRPC calls with a deadline.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { grpcTlsSettings, loadConfig, optionalSetting, otlpEndpointSetting, parse, setting, type ConfigOf } from "@switchyard/platform/config.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { GATEWAY_SERVICE, type Caller } from "@switchyard/platform/caller.js";
import { serviceCredentialsFromIdentity } from "@switchyard/platform/service-credentials.js";
import { createServiceClient, openTransportSecurity } from "@switchyard/platform/grpc";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { forwardsClientAddress, upstreamHeaders } from "./runtime/upstream-headers.js";
import { readRequestBody } from "./runtime/body.js";
import { closeConnectionsLingering } from "./runtime/lingering-close.js";
import { edgeError, toHttpError } from "./runtime/errors.js";
import { describeBodyError, describeParamError, loadApiDocument, representationsOf, servedApiPath, type ApiDocument, type CompiledOperation } from "./runtime/openapi.js";
import { addMonths, checkSunset, DeprecatedRouteUsage, deprecatedOperations, deprecationHeaders, negotiateVersion, publishedVersions, SUNSET_MONTHS, V1_DEPRECATED_AT, versionsJson } from "./runtime/versions.js";
import { addHeaders, appendHeader, sendError, sendJson, sendSerialized, setHeaders, type ResponseHeaders } from "./runtime/respond.js";
import { EdgeCache } from "./runtime/edge-cache.js";
import { CacheLease } from "./runtime/cache-lease.js";
import { CACHE_FAULT_POINTS, CacheFollower } from "./runtime/cache-follower.js";
import { Faults, faultsSetting } from "@switchyard/platform/faults.js";
import { writeEventStream } from "./runtime/sse.js";
import { clientAddress } from "./runtime/client-address.js";
import { StreamSlots, wantsEventStream } from "./runtime/streams.js";
import { LiveFanout } from "./runtime/live-fanout.js";
import { corsPolicy, parseOrigins } from "./runtime/cors.js";
import { RPC_PREFIX, rpcProxy } from "./rpc-proxy.js";
import { createRateLimiter, quotaKey, type RateDecision } from "./runtime/rate-limit.js";
import { AdaptiveConcurrencyLimit, type Release } from "./runtime/concurrency-limit.js";
import { RequestCancellation } from "./runtime/cancellation.js";
import { FailureLog } from "./runtime/failure-log.js";
import type { BodyLine, RouteGroup, RouteHandler } from "./runtime/route.js";
import { Router } from "./runtime/router.js";
import { identityRoutes } from "./routes/identity.js";
import { paymentRoutes } from "./routes/payments.js";
import { orderRoutes } from "./routes/orders.js";
import { contentRoutes } from "./routes/content.js";
import { openUpstreams, type UpstreamName, type Upstreams } from "./upstreams.js";
import { createDocsSite } from "./docs.js";
import { gatewayShed, reportGatewayGauges, startProcessMetrics, writeMetrics } from "@switchyard/platform/metrics.js";
import { startTracing } from "@switchyard/platform/tracing.js";
import { observeRequest, type RequestRecord } from "./runtime/observability.js";
import { REQUEST_ID_HEADER } from "@switchyard/platform/request-id.js";

export const gatewaySettings = {
  host: setting("GATEWAY_HOST", parse.string, "interface the HTTP server binds", "127.0.0.1"),
  port: setting("GATEWAY_PORT", parse.port, "HTTP port of the public API", 8080),
  listenFd: optionalSetting("LISTEN_FD", parse.int(3, 65_535), "serve on this inherited, already listening socket instead of binding GATEWAY_HOST:GATEWAY_PORT (the mesh launcher hands sockets over so no other process can take a port first)"),
  logLevel: setting("LOG_LEVEL", parse.oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"), "log level", "info" as string),
  ...grpcTlsSettings,
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service", "127.0.0.1:50051"),
  paymentsAddress: setting("PAYMENTS_ADDRESS", parse.address, "payments service", "127.0.0.1:50052"),
  ordersAddress: setting("ORDERS_ADDRESS", parse.address, "orders service", "127.0.0.1:50053"),
  contentAddress: setting("CONTENT_ADDRESS", parse.address, "content service", "127.0.0.1:50054"),
  rateLimit: setting("GATEWAY_RATE_LIMIT", parse.int(1, 1_000_000), "requests a credential (or an anonymous client address) may make per window", 600),
  rateWindowSeconds: setting("GATEWAY_RATE_WINDOW_SECONDS", parse.int(1, 86_400), "length of the rate-limit window", 60),
  rateLimitPrefix: setting("GATEWAY_RATE_LIMIT_PREFIX", parse.string, "key prefix of the counters (replicas sharing a quota use the same one)", "switchyard:rl"),
  redisUrl: optionalSetting("REDIS_URL", parse.url("redis:", "rediss:"), "Redis for rate-limit counters shared by every gateway replica; unset = per process"),
  trustedProxyHops: setting("GATEWAY_TRUSTED_PROXY_HOPS", parse.int(0, 10), "proxies in front of the gateway that append to X-Forwarded-For (Envoy: 1): the client address is the N-th entry from its right; 0 = the socket's peer", 0),
  maxStreamsPerCaller: setting("GATEWAY_MAX_STREAMS_PER_CALLER", parse.int(1, 100_000), "live streams (text/event-stream) one caller may hold open at once, per gateway process; beyond → 429 TOO_MANY_STREAMS", 5),
  heartbeatMs: setting("GATEWAY_SSE_HEARTBEAT_MS", parse.int(1_000, 300_000), "interval of heartbeat comments on idle event streams", 15_000),
  deadlineMs: setting("GATEWAY_DEADLINE_MS", parse.int(50, 120_000), "default deadline of every request's upstream call chain", 5_000),
  maxDeadlineMs: setting("GATEWAY_MAX_DEADLINE_MS", parse.int(50, 600_000), "the longest deadline a client may ask for with X-Request-Timeout-Ms", 30_000),
  concurrencyInitial: setting("GATEWAY_CONCURRENCY_INITIAL", parse.int(1, 100_000), "adaptive concurrency limit (requests in flight) at start and after 5 s with nothing in flight; whenever latency is within the buffer the limit grows back to at least this", 100),
  concurrencyMin: setting("GATEWAY_CONCURRENCY_MIN", parse.int(1, 100_000), "lowest the adaptive concurrency limit goes; a request that had no more than this many in flight all its life counts as unqueued (its latency teaches the latency without a queue), and a window with no more than this many never shrinks the limit", 3),
  concurrencyBufferPercent: setting("GATEWAY_CONCURRENCY_BUFFER_PERCENT", parse.int(0, 1_000), "how much slower than without a queue requests may get (median, in percent) before the adaptive limit shrinks", 50),
  concurrencyMax: setting("GATEWAY_CONCURRENCY_MAX", parse.int(1, 100_000), "highest the adaptive concurrency limit goes", 1_000),
  concurrencyProbeIntervalMs: setting("GATEWAY_CONCURRENCY_PROBE_INTERVAL_MS", parse.int(100, 3_600_000), "while the adaptive limit sheds under sustained load (more than GATEWAY_CONCURRENCY_MIN in flight without pause), the least time between probes that admit half of the requests in flight for a few dozen requests, to check the latency without a queue (±15% jitter); never on an idle or lightly loaded gateway", 60_000),
  maxBodyBytes: setting("GATEWAY_MAX_BODY_BYTES", parse.int(1_024, 10 * 1024 * 1024), "largest accepted request body", 64 * 1024),
  drainTimeoutMs: setting("SHUTDOWN_DRAIN_MS", parse.int(0, 600_000), "how long SIGTERM waits for in-flight requests", 10_000),
  v1SunsetAt: setting(
    "GATEWAY_V1_SUNSET",
    (raw: string) => {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(raw)) throw new Error(`expected a date (YYYY-MM-DD), got "${raw}"`);
      const date = new Date(`${raw}T00:00:00Z`);
      checkSunset(date, V1_DEPRECATED_AT);
      return date;
    },
    `the day v1 stops being served, announced in its deprecated routes' Sunset header: ${SUNSET_MONTHS.min} to ${SUNSET_MONTHS.max} months after its deprecation (${V1_DEPRECATED_AT.toISOString().slice(0, 10)})`,
    addMonths(V1_DEPRECATED_AT, SUNSET_MONTHS.default),
  ),
  corsOrigins: optionalSetting("GATEWAY_CORS_ORIGINS", parseOrigins, "comma-separated exact origins (scheme://host[:port]) whose pages may call /v<N>/ and /rpc/ across origins (CORS); unset = no CORS headers at all"),
  otlpEndpoint: otlpEndpointSetting,
  serviceSecret: setting(
    "GATEWAY_SERVICE_SECRET",
    parse.secretMatching(/^[\x21-\x7e]{32,}$/, "a secret of at least 32 visible ASCII characters"),
    "the secret the gateway presents to identity for its own service token (its entry gateway:<secret> in identity's IDENTITY_SERVICE_CREDENTIALS): it vouches for the client addresses the gateway forwards",
  ),
  edgeCache: setting("GATEWAY_EDGE_CACHE", parse.bool, "answer GET /v<N>/catalog/items and GET /v<N>/docs/{doc_id} from memory, kept coherent with content's writes by its change stream and a lease (false: every read goes to content)", true),
  edgeCacheEntries: setting("GATEWAY_EDGE_CACHE_ENTRIES", parse.int(1, 10_000_000), "the most answers the edge cache keeps (least recently used out first)", 10_000),
  edgeCacheMb: setting("GATEWAY_EDGE_CACHE_MB", parse.int(1, 64 * 1024), "the most memory the edge cache's answers take, in MiB (bodies and bookkeeping)", 64),
  faults: faultsSetting(CACHE_FAULT_POINTS),
  deprecationLogIntervalMs: setting("GATEWAY_DEPRECATION_LOG_INTERVAL_MS", parse.int(100, 3_600_000), "how often the counts of deprecated routes used (per tenant and route) are logged", 60_000),
};
export type GatewayConfig = ConfigOf<typeof gatewaySettings>;

export function gatewayConfigFrom(env: NodeJS.ProcessEnv): GatewayConfig {
  return loadConfig(gatewaySettings, env);
}

const ROUTE_GROUPS: RouteGroup[] = [identityRoutes, paymentRoutes, orderRoutes, contentRoutes];
const BUILT_IN = new Set(["getOpenApiDocument"]);

interface BoundRoute {
  handler: RouteHandler;
  upstream: UpstreamName;
}

/** Every operation of the document has exactly one handler, and every handler an operation. */
export function bindRoutes(operations: CompiledOperation[], groups: RouteGroup[] = ROUTE_GROUPS): Map<string, BoundRoute> {
  const bound = new Map<string, BoundRoute>();
  for (const group of groups) {
    for (const [operationId, handler] of Object.entries(group.handlers)) {
      if (bound.has(operationId)) throw new Error(`two handlers for operation ${operationId}`);
      bound.set(operationId, { handler, upstream: group.upstream });
    }
  }
  const documented = new Set(operations.map((o) => o.operationId));
  const missing = [...documented].filter((id) => !bound.has(id) && !BUILT_IN.has(id));
  const undocumented = [...bound.keys()].filter((id) => !documented.has(id));
  if (missing.length > 0 || undocumented.length > 0) {
    throw new Error(`routes and OpenAPI document disagree: without handler [${missing.join(", ")}], without operation [${undocumented.join(", ")}]`);
  }
  return bound;
}

export interface RunningGateway {
  readonly port: number;
  readonly server: Server;
  stop(): Promise<void>;
}

/** The deadline a request gets: the default, or what the client asks for, up to the maximum. */
function deadlineOf(asked: string | string[] | undefined, config: GatewayConfig): number {
  if (asked === undefined) return config.deadlineMs;
  if (typeof asked !== "string" || !/^\d{1,9}$/.test(asked) || Number(asked) < 1) {
    throw edgeError("INVALID_REQUEST", "X-Request-Timeout-Ms must be a whole number of milliseconds from 1");
  }
  return Math.min(Number(asked), config.maxDeadlineMs);
}

function splitUrl(url: string): { pathname: string; search: string } {
  const q = url.indexOf("?");
  return q === -1 ? { pathname: url, search: "" } : { pathname: url.slice(0, q), search: url.slice(q + 1) };
}

export async function startGateway(config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  // Observability: spans when the OTEL_* variables ask for them, metrics at /metrics, an access log at info.
  const stopTracing = await startTracing("gateway");
  startProcessMetrics("gateway");
  const accessLog = logger.isLevelEnabled("info");
  // One document per published version, each driving its own routes; one router over all of them.
  const versions = publishedVersions(config.v1SunsetAt);
  const publishedMajors = versions.map((v) => v.major);
  const apis = new Map<number, ApiDocument>(versions.map((v) => [v.major, loadApiDocument(servedApiPath(v.major))]));
  const routes = new Map([...apis.values()].flatMap((a) => [...bindRoutes(a.operations)]));
  const router = new Router([...apis.values()].flatMap((a) => a.operations));
  const deprecations = deprecatedOperations(versions, (major) => representationsOf(apis.get(major)!));
  const deprecatedUsage = new DeprecatedRouteUsage(logger, config.deprecationLogIntervalMs);
  // The API reference (/docs): a page per published version, rendering the documents loaded above.
  const docs = createDocsSite(versions.map((v) => ({ version: `v${v.major}`, status: v.status, document: apis.get(v.major)!.document })));
  // Mutual TLS to the services when GRPC_TLS_* are set: the gateway's certificate names it ("gateway").
  const tls = openTransportSecurity(config, GATEWAY_SERVICE, logger);
  const upstreams: Upstreams = openUpstreams({ identity: config.identityAddress, payments: config.paymentsAddress, orders: config.ordersAddress, content: config.contentAddress }, tls);
  // The gateway verifies tokens itself (for quotas and early 401s), with identity's keys and revocations.
  const { verifier, follower } = await verifierFromIdentity(upstreams.channels.identity, logger);
  // Its own token vouches for the client addresses it forwards to identity (upstream-headers.ts).
  const ownCredentials = serviceCredentialsFromIdentity(upstreams.channels.identity, GATEWAY_SERVICE, config.serviceSecret);
  const concurrency = new AdaptiveConcurrencyLimit({
    initialLimit: config.concurrencyInitial,
    minLimit: config.concurrencyMin,
    maxLimit: Math.max(config.concurrencyMin, config.concurrencyMax),
    buffer: config.concurrencyBufferPercent / 100,
    minRttIntervalMs: config.concurrencyProbeIntervalMs,
  });
  const rateLimiter = createRateLimiter({ limit: config.rateLimit, windowSeconds: config.rateWindowSeconds, redisUrl: config.redisUrl, keyPrefix: config.rateLimitPrefix });
  const healthClients = Object.entries(upstreams.channels).map(([name, channel]) => [name, createServiceClient(Health, channel)] as const);
  const failures = new FailureLog(logger);
  // Refusals made often under pressure are built once.
  const SHED = edgeError("LOAD_SHED", "the gateway is at capacity; retry after the Retry-After delay", { "retry-after": "1" });
  const streamSlots = new StreamSlots(config.maxStreamsPerCaller);
  const fanout = new LiveFanout(logger);
  reportGatewayGauges({
    limit: () => concurrency.sheddingLimit,
    shedding: () => (concurrency.shedding ? 1 : 0),
    inflight: () => concurrency.inflight,
    minRttMs: () => concurrency.minRtt,
    liveStreams: () => streamSlots.size,
    sharedLiveStreams: () => fanout.size,
  });
  // The edge cache: answers from memory only under a lease from content, dropped by its change stream.
  const cacheLease = new CacheLease();
  const edgeCache = config.edgeCache ? new EdgeCache({ maxEntries: config.edgeCacheEntries, maxBytes: config.edgeCacheMb * 1024 * 1024 }, () => cacheLease.serves()) : undefined;
  const cacheFollower = edgeCache && new CacheFollower(upstreams.content, () => ownCredentials.token(), edgeCache, cacheLease, logger, { faults: new Faults(config.faults, logger) });
  cacheFollower?.start();
  const rateLimitedMessage = `rate limit of ${config.rateLimit} requests per ${config.rateWindowSeconds} s reached; retry after the Retry-After delay`;
  const RATE_LIMITED = edgeError("RATE_LIMITED", rateLimitedMessage);
  const cors = corsPolicy(config.corsOrigins ?? []);
  // The browser proxy (/rpc/…): the same channels, quotas, limit and stream slots as /v1.
  const rpc = rpcProxy({
    upstreams,
    verifier,
    ownCredentials,
    rateLimiter,
    rateLimitedMessage,
    concurrency,
    streamSlots,
    maxStreamsPerCaller: config.maxStreamsPerCaller,
    deadlineMs: config.deadlineMs,
    maxDeadlineMs: config.maxDeadlineMs,
    maxBodyBytes: config.maxBodyBytes,
    onShed: () => gatewayShed.inc(),
  });

  /**
   * Each upstream's state over grpc.health.v1, for operators. It does not decide readiness: the
   * gateway is ready when it itself can serve (it started, and is not draining) — one service down
   * makes only that service's routes answer 502/503, not the whole edge leave the load balancer.
   */
  async function upstreamStates(): Promise<Record<string, string>> {
    const checks = await Promise.allSettled(healthClients.map(([, h]) => h.check({ service: "" }, { timeoutMs: 1_000 })));
    return Object.fromEntries(
      checks.map((c, i) => [healthClients[i]![0], c.status === "fulfilled" ? HealthCheckResponse_ServingStatus[c.value.status] : "UNREACHABLE"]),
    );
  }
  let draining = false;

  /** /readyz: ready while it serves; draining before exit takes it out of rotation, so no new work is sent here. */
  async function answerReadiness(res: ServerResponse, headers: ResponseHeaders): Promise<void> {
    if (draining) return sendJson(res, 503, { status: "draining" }, headers, { "retry-after": "1" });
    sendJson(res, 200, { status: "ready", upstreams: await upstreamStates() }, headers);
  }

  /**
   * Which part of the edge answers a request: the fixed paths, the API reference, a CORS preflight,
   * the browser proxy, or the API. `headers`: what the answer carries so far (its request id).
   */
  function handle(req: IncomingMessage, res: ServerResponse, record: RequestRecord, headers: ResponseHeaders): Promise<void> | void {
    const { pathname, search } = splitUrl(req.url ?? "/");
    const method = req.method ?? "GET";
    if (pathname === "/healthz") return sendJson(res, 200, { status: "ok" }, headers);
    if (pathname === "/readyz") return answerReadiness(res, headers);
    if (pathname === "/versions" && (method === "GET" || method === "HEAD")) return sendJson(res, 200, versionsJson(versions), headers);
    if (pathname === "/metrics" && (method === "GET" || method === "HEAD")) {
      setHeaders(res, headers);
      return writeMetrics(res);
    }
    // The API reference (/docs): static pages, outside the versions and their quotas.
    if (docs.handles(pathname)) {
      setHeaders(res, headers);
      return docs.serve(req, res, pathname);
    }
    if (cors.handle(req, res, pathname, headers)) return;
    if (pathname.startsWith(`${RPC_PREFIX}/`)) {
      record.route = rpc.routeOf(pathname);
      setHeaders(res, headers);
      return rpc.handle(req, res, { address: clientAddress(req, config.trustedProxyHops), requestId: record.requestId, refusedBy: (quota) => (record.quotaKind = quota) });
    }
    return serveApi(req, res, record, headers, pathname, search, method);
  }

  /**
   * The quota's headers on the answer; past the quota, 429 before any other answer (RATE_LIMITED).
   * A quota drawn on by a verified caller is theirs (`byUser`), else the client address's.
   */
  function applyQuota(quota: RateDecision, req: IncomingMessage, record: RequestRecord, headers: ResponseHeaders, byUser: boolean): void {
    for (const name in quota.headers) headers[name] = quota.headers[name]!;
    if (quota.allowed) return;
    req.resume();
    record.quotaKind = byUser ? "user" : "address";
    throw RATE_LIMITED;
  }

  /**
   * A request of the API (/v<N>/…): who asks; its route and version; its quota and admission; its
   * input, checked against the document; the route's upstream calls; the answer.
   */
  async function serveApi(req: IncomingMessage, res: ServerResponse, record: RequestRecord, headers: ResponseHeaders, pathname: string, search: string, method: string): Promise<void> {
    let presentedToken = false;
    let upstream = "upstream";
    /** Set when the upstream call starts. */
    let cancellation: RequestCancellation | undefined;
    let release: Release | undefined;
    let gone = false;
    record.onClose = () => {
      // A client that goes away cancels the gRPC call and everything below it.
      gone = !res.writableFinished;
      if (gone) cancellation?.abort();
      // Only answers that did the upstream work teach the concurrency limit their latency (an answer
      // from the edge cache's memory would teach it a latency no upstream call has).
      release?.(cancellation !== undefined && record.cache !== "hit" && res.statusCode < 500);
    };
    try {
      // Who is asking: a presented token is verified before anything is drawn on a quota, so only a
      // real user has a quota of their own; an absent or invalid one draws on the client address's.
      // A header seen before is known at once, without a promise.
      const authorization = req.headers.authorization;
      presentedToken = authorization !== undefined;
      let caller: Caller | undefined;
      let refusedToken: unknown;
      if (presentedToken) {
        caller = verifier.knownAuthorization(authorization);
        if (!caller) {
          try {
            caller = await verifier.verifyAuthorization(authorization);
          } catch (err) {
            refusedToken = err;
          }
        }
      }
      const address = clientAddress(req, config.trustedProxyHops);
      const quotaOf = quotaKey(caller, address);
      let operation: CompiledOperation;
      let pathParams: Record<string, string>;
      let pathMajor: number;
      let negotiated: ReturnType<typeof negotiateVersion>;
      try {
        ({ operation, pathParams } = router.match(method, pathname));
        record.route = operation.pathTemplate;
        // The version: the path's, or another one asked for by media type on the same path (406 if unknown).
        pathMajor = operation.version;
        negotiated = negotiateVersion(pathMajor, req.headers.accept, req.headers["content-type"], publishedMajors);
        appendHeader(headers, "vary", "Accept");
        if (negotiated.mediaType) headers["content-type"] = `${negotiated.mediaType}; charset=utf-8`;
        if (negotiated.major !== pathMajor) operation = router.match(method, pathname.replace(/^\/v\d+/, `/v${negotiated.major}`)).operation;
      } catch (err) {
        // A refused route or version is an API answer too: it draws on the quota (and 429 comes first).
        applyQuota(await rateLimiter.check(quotaOf), req, record, headers, caller !== undefined);
        throw err;
      }
      const deprecated = deprecations.get(negotiated.major);
      if (deprecated?.operations.has(operation.operationId)) {
        Object.assign(headers, deprecationHeaders(deprecated.version, pathname.replace(/^\/v\d+/, `/v${deprecated.successor}`)));
        deprecatedUsage.count(caller?.tenantId ?? (typeof pathParams.tenant_id === "string" ? pathParams.tenant_id : "-"), `${method} ${operation.pathTemplate}`, caller !== undefined);
      }
      if (operation.operationId === "getOpenApiDocument") {
        applyQuota(await rateLimiter.check(quotaOf), req, record, headers, caller !== undefined);
        return sendJson(res, 200, apis.get(pathMajor)!.document, headers);
      }
      const route = routes.get(operation.operationId)!;
      upstream = route.upstream;
      // Beyond the adaptive limit a request is shed at once, before any work is spent on it, instead
      // of queueing. A live stream is admitted the same way — it is shed under overload too — and
      // gives its place back once it is open (it is long by design, and says nothing of latency).
      // A shed request draws nothing on the quota (the refusal is the gateway's) and carries it as it stands.
      release = concurrency.tryAcquire();
      applyQuota(await (release ? rateLimiter.check(quotaOf) : rateLimiter.peek(quotaOf)), req, record, headers, caller !== undefined);
      if (!release) {
        req.resume();
        gatewayShed.inc();
        return sendError(res, SHED, presentedToken, headers);
      }
      const eventStream = wantsEventStream(operation, req.headers.accept);
      if (eventStream) {
        // Each caller holds only so many: the slot is theirs until the stream closes.
        const slot = streamSlots.take(quotaOf);
        if (!slot) record.quotaKind = "streams";
        if (!slot) throw edgeError("TOO_MANY_STREAMS", `at most ${config.maxStreamsPerCaller} live streams at once; close one first`, { "retry-after": "5" });
        res.once("close", slot);
      }

      const params: Record<string, unknown> = { ...pathParams };
      if (search) {
        const query = new URLSearchParams(search);
        for (const name of operation.queryParams) {
          const values = query.getAll(name);
          if (values.length > 1) throw edgeError("INVALID_REQUEST", `query parameter ${name} is given more than once`);
          if (values.length === 1) params[name] = values[0];
        }
      }
      for (const { key } of operation.headerParams) {
        const value = req.headers[key];
        if (typeof value === "string") params[key] = value;
      }
      // Integers are plain decimals: no 0x, exponents, signs, spaces or Infinity slipping through coercion.
      for (const name of operation.integerParams) {
        const raw = params[name];
        if (typeof raw !== "string") continue;
        if (!/^-?(0|[1-9][0-9]{0,15})$/.test(raw)) throw edgeError("INVALID_REQUEST", `${name} must be a whole number written in decimal digits`);
        params[name] = Number(raw);
      }
      if (!operation.validateParams(params)) throw edgeError("INVALID_REQUEST", describeParamError(operation.validateParams.errors![0]!));

      let body: unknown;
      let lines: BodyLine[] | undefined;
      const sentBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
      if (operation.validateBody && (operation.bodyRequired || sentBody)) {
        const read = await readRequestBody(req, config.maxBodyBytes, operation.acceptsNdjson);
        // An NDJSON body is the array of its lines (a line that is no JSON holds its place as null).
        body = read.media === "json" ? read.value : read.lines.map((l) => (l.unparsable ? null : l.value));
        if (!operation.validateBody(body)) {
          const problem = describeBodyError(operation.validateBody.errors![0]!);
          throw edgeError(problem.status === 422 ? "RULE_VIOLATION" : "INVALID_REQUEST", problem.message);
        }
        const validateLine = operation.validateLine;
        if (validateLine) {
          // Each element on its own: one that is not what the document says is that line's problem.
          const numbered = read.media === "json" ? (body as unknown[]).map((value, i) => ({ line: i + 1, value, unparsable: false })) : read.lines;
          lines = numbered.map(({ line, value, unparsable }): BodyLine => {
            if (unparsable) return { line, problem: { status: 400, message: "the line is not a JSON value" } };
            return validateLine(value) ? { line, value } : { line, problem: describeBodyError(validateLine.errors![0]!, "item") };
          });
        }
      }

      const deadlineMs = deadlineOf(req.headers["x-request-timeout-ms"], config);
      // A route that needs a user: no token or an invalid one is answered here, never passed on.
      if (operation.requiresAuth && !caller) throw refusedToken ?? edgeError("UNAUTHENTICATED", "a bearer token is required");
      if (!operation.requiresAuth) caller = undefined;
      const deadlineAt = Date.now() + deadlineMs;
      const cancel = (cancellation = new RequestCancellation());
      if (gone) cancel.abort(); // it left while the request was being read or checked
      const gatewayToken = forwardsClientAddress(route.upstream) ? await ownCredentials.token() : undefined;
      const callHeaders = upstreamHeaders(route.upstream, caller, { address, requestId: record.requestId }, gatewayToken);
      const result = await route.handler({
        params,
        body,
        lines,
        caller,
        eventStream,
        upstreams,
        path: pathname,
        version: negotiated.major,
        base: `/v${pathMajor}`,
        headers: req.headers,
        callOptions: () => ({ signal: cancel.callSignal, timeoutMs: deadlineAt - Date.now(), headers: callHeaders }),
        streamCallOptions: () => ({ signal: cancel.signal, headers: callHeaders }),
        fanout,
        edgeCache,
        cacheResult: (result) => (record.cache = result),
      });
      if (result.events) {
        const admitted = release;
        release = undefined;
        admitted?.(false);
        const streamCaller = caller;
        record.eventStream = true;
        if (result.headers) addHeaders(headers, result.headers);
        try {
          return await writeEventStream(res, result.events, result.follow, {
            heartbeatMs: config.heartbeatMs,
            signal: cancel.signal,
            cancel: () => cancel.abort(),
            headers,
            watchCredential: streamCaller && ((end) => verifier.watch(streamCaller, end)),
          });
        } finally {
          // However the stream ended, what it held upstream goes (its calls, its place in a shared stream).
          cancel.abort();
        }
      }
      if (result.serialized) sendSerialized(res, result.status, result.serialized, headers, result.headers);
      else sendJson(res, result.status, result.body, headers, result.headers);
    } catch (err) {
      const httpError = toHttpError(err, upstream);
      if (httpError.status >= 500) {
        failures.report(httpError.code, () => ({
          status: httpError.status,
          request_id: record.requestId,
          method: req.method,
          path: req.url?.split("?")[0],
          cause: err instanceof Error ? { type: err.name, message: err.message } : { message: String(err) },
        }));
      }
      sendError(res, httpError, presentedToken, headers);
    }
  }

  function unhandled(err: unknown, res: ServerResponse, record: RequestRecord, headers: ResponseHeaders): void {
    logger.error({ err, request_id: record.requestId }, "unhandled error in request pipeline");
    if (!res.headersSent) sendJson(res, 500, { error: "internal error", code: "INTERNAL" }, headers);
  }

  const server = createServer({ requestTimeout: 30_000, headersTimeout: 10_000, keepAliveTimeout: 5_000, requireHostHeader: false }, (req, res) => {
    if (!req.headers.host && req.httpVersion === "1.1") {
      req.resume();
      return sendJson(res, 400, { error: "an HTTP/1.1 request needs a Host header", code: "INVALID_REQUEST" });
    }
    const record = observeRequest(req, res, config.trustedProxyHops, logger, accessLog);
    // Every answer carries its request id; what else it carries is gathered on the way (runtime/respond.ts).
    const headers: ResponseHeaders = { [REQUEST_ID_HEADER]: record.requestId };
    try {
      record.run(handle, req, res, record, headers)?.catch((err: unknown) => unhandled(err, res, record, headers));
    } catch (err) {
      unhandled(err, res, record, headers);
    }
  });
  // An answer sent before the body was read must still reach the client (runtime/lingering-close.ts).
  closeConnectionsLingering(server);
  // Node answers some requests itself; they get the JSON error body too.
  server.on("checkExpectation", (req, res) => {
    req.resume();
    sendJson(res, 417, { error: `unsupported Expect: ${String(req.headers.expect).slice(0, 100)}`, code: "INVALID_REQUEST" });
  });
  server.on("connect", (req, socket) => {
    // No route takes CONNECT: answer as the router does (405 with Allow, or 404).
    const target = req.url ?? "";
    let refusal = edgeError("INVALID_REQUEST", "CONNECT is not supported: this is not a proxy");
    if (target.startsWith("/")) {
      try {
        router.match("CONNECT", splitUrl(target).pathname);
      } catch (err) {
        if (err instanceof Error && "status" in err) refusal = err as typeof refusal;
      }
    }
    const body = JSON.stringify({ error: refusal.message, code: refusal.code });
    const extra = Object.entries(refusal.headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
    socket.end(`HTTP/1.1 ${refusal.status} ${refusal.status === 404 ? "Not Found" : refusal.status === 405 ? "Method Not Allowed" : "Bad Request"}\r\n${extra}content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
  // Requests node cannot even parse still get a JSON error, not a bare socket reset.
  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    // Bytes after a request that was fully read and is still being answered: let that answer
    // finish, then close. (A body broken half-way gets the 400 below.)
    const inFlight = (socket as unknown as { _httpMessage?: ServerResponse })._httpMessage;
    if (inFlight && !inFlight.writableFinished && !inFlight.headersSent && inFlight.req?.complete) {
      inFlight.once("finish", () => socket.destroy());
      return;
    }
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const body = JSON.stringify({ error: status === 431 ? "request headers are too large" : "malformed HTTP request", code: "INVALID_REQUEST" });
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? "Request Header Fields Too Large" : status === 408 ? "Request Timeout" : "Bad Request"}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if (config.listenFd !== undefined) server.listen({ fd: config.listenFd }, () => resolve());
    else server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port }, "gateway listening");

  let stopping: Promise<void> | undefined;
  return {
    port,
    server,
    stop: () =>
      (stopping ??= new Promise<void>((resolve) => {
        draining = true;
        // The edge cache gives its lease up first: no write in content waits for a gateway that is leaving.
        const cacheStopped = cacheFollower?.stop();
        fanout.endAll(edgeError("UPSTREAM_UNAVAILABLE", "the gateway is shutting down; reconnect"));
        const timer = setTimeout(() => server.closeAllConnections(), config.drainTimeoutMs);
        server.close(() => {
          clearTimeout(timer);
          failures.stop();
          deprecatedUsage.stop();
          follower.stop();
          void Promise.resolve(cacheStopped)
            .then(() => upstreams.close())
            .then(() => rateLimiter.close())
            .then(stopTracing)
            .then(resolve);
        });
        server.closeIdleConnections();
      })),
  };
}

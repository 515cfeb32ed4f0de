// The gateway's settings: every environment variable it reads, validated once at start (a bad value
// stops it with a list of every problem). main.ts is the only caller that passes the real environment.
import {
  grpcTlsSettings,
  launcherFdSetting,
  loadConfig,
  optionalSetting,
  otlpEndpointSetting,
  parse,
  setting,
  type ConfigOf,
} from "@switchyard/platform/config.js";
import { faultsSetting } from "@switchyard/platform/faults.js";
import { addMonths, checkSunset, SUNSET_MONTHS, V1_DEPRECATED_AT } from "./runtime/versions.js";
import { parseOrigins } from "./runtime/cors.js";
import { CACHE_FAULT_POINTS } from "./runtime/cache-follower.js";

export const gatewaySettings = {
  host: setting("GATEWAY_HOST", parse.string, "interface the HTTP server binds", "127.0.0.1"),
  port: setting("GATEWAY_PORT", parse.port, "HTTP port of the public API", 8080),
  listenFd: optionalSetting(
    "LISTEN_FD",
    parse.int(3, 65_535),
    "serve on this inherited, already listening socket instead of binding GATEWAY_HOST:GATEWAY_PORT (the mesh launcher hands sockets over so no other process can take a port first)",
  ),
  launcherFd: launcherFdSetting,
  logLevel: setting(
    "LOG_LEVEL",
    parse.oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    "log level",
    "info",
  ),
  ...grpcTlsSettings,
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service", "127.0.0.1:50051"),
  paymentsAddress: setting("PAYMENTS_ADDRESS", parse.address, "payments service", "127.0.0.1:50052"),
  ordersAddress: setting("ORDERS_ADDRESS", parse.address, "orders service", "127.0.0.1:50053"),
  contentAddress: setting("CONTENT_ADDRESS", parse.address, "content service", "127.0.0.1:50054"),
  webhooksAddress: setting("WEBHOOKS_ADDRESS", parse.address, "webhooks service", "127.0.0.1:50055"),
  rateLimit: setting(
    "GATEWAY_RATE_LIMIT",
    parse.int(1, 1_000_000),
    "requests a credential (or an anonymous client address) may make per window",
    600,
  ),
  rateWindowSeconds: setting(
    "GATEWAY_RATE_WINDOW_SECONDS",
    parse.int(1, 86_400),
    "length of the rate-limit window",
    60,
  ),
  rateLimitPrefix: setting(
    "GATEWAY_RATE_LIMIT_PREFIX",
    parse.string,
    "key prefix of the counters (replicas sharing a quota use the same one)",
    "switchyard:rl",
  ),
  redisUrl: optionalSetting(
    "REDIS_URL",
    parse.url("redis:", "rediss:"),
    "Redis for rate-limit counters shared by every gateway replica; unset = per process",
  ),
  trustedProxyHops: setting(
    "GATEWAY_TRUSTED_PROXY_HOPS",
    parse.int(0, 10),
    "proxies in front of the gateway that append to X-Forwarded-For (Envoy: 1): the client address is the N-th entry from its right; 0 = the socket's peer",
    0,
  ),
  maxStreamsPerCaller: setting(
    "GATEWAY_MAX_STREAMS_PER_CALLER",
    parse.int(1, 100_000),
    "live streams (text/event-stream) one caller may hold open at once, per gateway process; beyond → 429 TOO_MANY_STREAMS",
    5,
  ),
  heartbeatMs: setting(
    "GATEWAY_SSE_HEARTBEAT_MS",
    parse.int(1_000, 300_000),
    "interval of heartbeat comments on idle event streams",
    15_000,
  ),
  sseUpstreamOutageMs: setting(
    "GATEWAY_SSE_UPSTREAM_OUTAGE_MS",
    parse.int(0, 600_000),
    "how long a live feed (text/event-stream) rides out its upstream stream being dropped — a connection at its age, a replica restarting, a rollout — while the gateway reopens it after the last event delivered (with back-off); past it the feed ends in-band (event: error with retry: and the last id: the client reconnects with Last-Event-ID)",
    30_000,
  ),
  deadlineMs: setting(
    "GATEWAY_DEADLINE_MS",
    parse.int(50, 120_000),
    "default deadline of every request's upstream call chain",
    5_000,
  ),
  maxDeadlineMs: setting(
    "GATEWAY_MAX_DEADLINE_MS",
    parse.int(50, 600_000),
    "the longest deadline a client may ask for with X-Request-Timeout-Ms",
    30_000,
  ),
  concurrencyInitial: setting(
    "GATEWAY_CONCURRENCY_INITIAL",
    parse.int(1, 100_000),
    "adaptive concurrency limit (requests in flight) at start and after 5 s with nothing in flight; whenever latency is within the buffer the limit grows back to at least this",
    100,
  ),
  concurrencyMin: setting(
    "GATEWAY_CONCURRENCY_MIN",
    parse.int(1, 100_000),
    "lowest the adaptive concurrency limit goes; a request that had no more than this many in flight all its life counts as unqueued (its latency teaches the latency without a queue), and a window with no more than this many never shrinks the limit",
    3,
  ),
  concurrencyBufferPercent: setting(
    "GATEWAY_CONCURRENCY_BUFFER_PERCENT",
    parse.int(0, 1_000),
    "how much slower than without a queue requests may get (median, in percent) before the adaptive limit shrinks",
    50,
  ),
  concurrencyMax: setting(
    "GATEWAY_CONCURRENCY_MAX",
    parse.int(1, 100_000),
    "highest the adaptive concurrency limit goes",
    1_000,
  ),
  concurrencyProbeIntervalMs: setting(
    "GATEWAY_CONCURRENCY_PROBE_INTERVAL_MS",
    parse.int(100, 3_600_000),
    "while the adaptive limit sheds under sustained load (more than GATEWAY_CONCURRENCY_MIN in flight without pause), the least time between probes that admit half of the requests in flight for a few dozen requests, to check the latency without a queue (±15% jitter); never on an idle or lightly loaded gateway",
    60_000,
  ),
  maxBodyBytes: setting(
    "GATEWAY_MAX_BODY_BYTES",
    parse.int(1_024, 10 * 1024 * 1024),
    "largest accepted request body",
    64 * 1024,
  ),
  drainTimeoutMs: setting(
    "SHUTDOWN_DRAIN_MS",
    parse.int(0, 600_000),
    "how long SIGTERM waits for in-flight requests",
    10_000,
  ),
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
  corsOrigins: optionalSetting(
    "GATEWAY_CORS_ORIGINS",
    parseOrigins,
    "comma-separated exact origins (scheme://host[:port]) whose pages may call /v<N>/ and /rpc/ across origins (CORS); unset = no CORS headers at all",
  ),
  otlpEndpoint: otlpEndpointSetting,
  serviceSecret: setting(
    "GATEWAY_SERVICE_SECRET",
    parse.secretMatching(/^[\x21-\x7e]{32,}$/, "a secret of at least 32 visible ASCII characters"),
    "the secret the gateway presents to identity for its own service token (its entry gateway:<secret> in identity's IDENTITY_SERVICE_CREDENTIALS): it vouches for the client addresses the gateway forwards",
  ),
  priorities: setting(
    "GATEWAY_PRIORITIES",
    parse.bool,
    "shed by each operation's x-switchyard-priority under overload, and send it to the services (false: every request is default, as a comparison)",
    true,
  ),
  edgeCache: setting(
    "GATEWAY_EDGE_CACHE",
    parse.bool,
    "answer GET /v<N>/catalog/items and GET /v<N>/docs/{doc_id} from memory, kept coherent with content's writes by its change stream and a lease (false: every read goes to content)",
    true,
  ),
  edgeCacheEntries: setting(
    "GATEWAY_EDGE_CACHE_ENTRIES",
    parse.int(1, 10_000_000),
    "the most answers the edge cache keeps (least recently used out first)",
    10_000,
  ),
  edgeCacheMb: setting(
    "GATEWAY_EDGE_CACHE_MB",
    parse.int(1, 64 * 1024),
    "the most memory the edge cache's answers take, in MiB (bodies and bookkeeping)",
    64,
  ),
  faults: faultsSetting(CACHE_FAULT_POINTS),
  deprecationLogIntervalMs: setting(
    "GATEWAY_DEPRECATION_LOG_INTERVAL_MS",
    parse.int(100, 3_600_000),
    "how often the counts of deprecated routes used (per tenant and route) are logged",
    60_000,
  ),
};
export type GatewayConfig = ConfigOf<typeof gatewaySettings>;

export function gatewayConfigFrom(env: NodeJS.ProcessEnv): GatewayConfig {
  return loadConfig(gatewaySettings, env);
}

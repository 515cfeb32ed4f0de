// Prometheus metrics (prom-client): every metric of every process is declared here, once, so that the
// dashboard, the alert rules and the tests name one list. Label values are bounded: route templates
// (never raw paths or ids), gRPC method names, gRPC codes, status classes, SQL verbs, quota kinds, and
// tenant ids (bounded by the tenants that exist). The gateway serves them at /metrics on its own port;
// each service on its metrics port (<SERVICE>_METRICS_PORT). No database code here: the store only
// reports into these.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Counter, Gauge, Registry } from "prom-client";
import { LabeledHistogram } from "./labeled-histogram.js";

export const registry = new Registry();

/** Request and call latencies: from 1 ms (a cached read) to 10 s (past the default 5 s deadline). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Statements: embedded reads take tens of microseconds. */
const STATEMENT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

// ---- the edge (gateway) ------------------------------------------------------------------------------

export const httpRequestDuration = new LabeledHistogram({
  name: "switchyard_http_request_duration_seconds",
  help: "Requests answered by the gateway, by method, route template and status class (its _count is the request rate; 5xx the errors)",
  labelNames: ["method", "route", "status_class"] as const,
  buckets: LATENCY_BUCKETS,
  registry,
});

export const gatewayStreamsOpened = new Counter({
  name: "switchyard_gateway_streams_opened_total",
  help: "Live streams (text/event-stream) answered, by route template; they last minutes, so they are not in the request duration histogram",
  labelNames: ["route"] as const,
  registers: [registry],
});

export const gatewayLiveResubscriptions = new Counter({
  name: "switchyard_gateway_live_resubscriptions_total",
  help: "Upstream live streams the gateway opened again after the last event it delivered, once they dropped (a connection at its age, a replica restarting, a rollout) — unseen by their SSE subscribers; by stream: shared (a tenant's shared tail) or catch_up (a subscriber's own replay)",
  labelNames: ["stream"] as const,
  registers: [registry],
});

export const gatewayShed = new Counter({
  name: "switchyard_gateway_shed_total",
  help: "Requests the gateway's adaptive concurrency limit shed at once (503 LOAD_SHED), by the request's priority",
  labelNames: ["priority"] as const,
  registers: [registry],
});

export const gatewayRateLimited = new Counter({
  name: "switchyard_gateway_rate_limited_total",
  help: "429 answers by quota kind: user (a user's quota), address (a client address's), streams (live streams per caller), login (identity's failed-login throttle)",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const gatewayCacheResults = new Counter({
  name: "switchyard_gateway_cache_total",
  help: "Reads of cacheable routes by the edge cache's part in them: hit (answered from memory), miss (read upstream, kept), bypass (read upstream while the cache could not answer: no lease, or resynchronising), by route template; nothing when the cache is turned off",
  labelNames: ["result", "route"] as const,
  registers: [registry],
});

export const gatewayDeprecatedRequests = new Counter({
  name: "switchyard_gateway_deprecated_requests_total",
  help: "Requests to deprecated routes, by tenant and route template (tenants are bounded by the tenants that exist)",
  labelNames: ["tenant", "route"] as const,
  registers: [registry],
});

/** What the gateway reads its gauges from (set once it started). */
export interface GatewayGauges {
  /** The adaptive limit shedding holds requests to. */
  limit(): number;
  /** 1 while requests beyond the limit are shed (the backlog grew), else 0. */
  shedding(): number;
  /** While shedding, the requests admitted beyond the limit. */
  backlogAllowance(): number;
  inflight(): number;
  minRttMs(): number;
  liveStreams(): number;
  sharedLiveStreams(): number;
}
let gatewayGauges: GatewayGauges | undefined;
export function reportGatewayGauges(source: GatewayGauges | undefined): void {
  gatewayGauges = source;
}
const gatewayGauge = (name: string, help: string, read: (g: GatewayGauges) => number) =>
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      if (gatewayGauges) this.set(read(gatewayGauges));
    },
  });
gatewayGauge(
  "switchyard_gateway_concurrency_limit",
  "The adaptive concurrency limit: the requests in flight the gateway's latency target allows (while it sheds, it admits switchyard_gateway_backlog_allowance more)",
  (g) => g.limit(),
);
gatewayGauge(
  "switchyard_gateway_shedding",
  "1 while the gateway sheds requests beyond its adaptive limit (its backlog grew: arrivals outpaced completions), else 0",
  (g) => g.shedding(),
);
gatewayGauge(
  "switchyard_gateway_backlog_allowance",
  "While the gateway sheds: the requests it admits beyond its adaptive limit — the whole backlog while arrivals keep within the completion rate, what the upstream completes within the latency buffer while they outpace it",
  (g) => (g.shedding() ? g.backlogAllowance() : 0),
);
gatewayGauge(
  "switchyard_gateway_inflight_requests",
  "Requests admitted by the concurrency limit and not yet answered",
  (g) => g.inflight(),
);
gatewayGauge(
  "switchyard_gateway_min_rtt_seconds",
  "The latency without a queue (minRTT) the concurrency limit has learned from quiet requests and probes",
  (g) => g.minRttMs() / 1000,
);
gatewayGauge("switchyard_gateway_live_streams", "Live streams (text/event-stream) open at the gateway", (g) =>
  g.liveStreams(),
);
gatewayGauge(
  "switchyard_gateway_shared_live_streams",
  "Upstream live streams the gateway shares among its subscribers (one per tenant following the posts feed)",
  (g) => g.sharedLiveStreams(),
);

// ---- gRPC, both sides --------------------------------------------------------------------------------

export const rpcServerDuration = new LabeledHistogram({
  name: "switchyard_rpc_server_duration_seconds",
  help: "gRPC calls served (unary and client streaming), by service, method and gRPC code",
  labelNames: ["rpc_service", "rpc_method", "grpc_code"] as const,
  buckets: LATENCY_BUCKETS,
  registry,
});

export const rpcServerStreams = new Counter({
  name: "switchyard_rpc_server_streams_total",
  help: "Server-streaming gRPC calls ended, by service, method and gRPC code",
  labelNames: ["rpc_service", "rpc_method", "grpc_code"] as const,
  registers: [registry],
});

export const rpcClientDuration = new LabeledHistogram({
  name: "switchyard_rpc_client_duration_seconds",
  help: "gRPC calls made to other services (unary), by service, method and gRPC code",
  labelNames: ["rpc_service", "rpc_method", "grpc_code"] as const,
  buckets: LATENCY_BUCKETS,
  registry,
});

/** A server's open streams by service and method (every streaming method it serves, at 0 when none is open). */
export type OpenStreamCounts = ReadonlyMap<string, { rpcService: string; rpcMethod: string; open: number }>;
let openStreams: (() => OpenStreamCounts) | undefined;
export function reportOpenStreams(source: (() => OpenStreamCounts) | undefined): void {
  openStreams = source;
}
new Gauge({
  name: "switchyard_rpc_server_open_streams",
  help: "Streaming gRPC calls open on this server (live feeds, order tracking, revocation and cache-change watches), by service and method",
  labelNames: ["rpc_service", "rpc_method"] as const,
  registers: [registry],
  collect() {
    for (const { rpcService, rpcMethod, open } of openStreams?.().values() ?? [])
      this.labels({ rpc_service: rpcService, rpc_method: rpcMethod }).set(open);
  },
});

// ---- services: load shedding, database, idempotency -------------------------------------------------

export const serviceShed = new Counter({
  name: "switchyard_service_shed_total",
  help: "Calls a service shed because its event loop lagged (UNAVAILABLE LOAD_SHED), by the call's priority",
  labelNames: ["priority"] as const,
  registers: [registry],
});

let eventLoopLag: (() => number) | undefined;
export function reportEventLoopLag(source: (() => number) | undefined): void {
  eventLoopLag = source;
}
new Gauge({
  name: "switchyard_event_loop_delay_p99_seconds",
  help: "p99 event-loop delay of the last half-second window, as the load-shedding guard sees it",
  registers: [registry],
  collect() {
    if (eventLoopLag) this.set(eventLoopLag() / 1000);
  },
});

export const dbStatementDuration = new LabeledHistogram({
  name: "switchyard_db_statement_duration_seconds",
  help: "Database statements, by SQL verb (SELECT, INSERT, …) and outcome",
  labelNames: ["operation", "outcome"] as const,
  buckets: STATEMENT_BUCKETS,
  registry,
});

/** Connections of one open database: in use, and callers waiting for one. */
export interface PoolStats {
  inUse(): number;
  waiting(): number;
}
const pools = new Set<PoolStats>();
/** Reports a database's pool until the returned function is called (it closed). */
export function reportPool(stats: PoolStats): () => void {
  pools.add(stats);
  return () => pools.delete(stats);
}
new Gauge({
  name: "switchyard_db_pool_connections_in_use",
  help: "Database connections running work (embedded storage: 1 while a statement or transaction holds it)",
  registers: [registry],
  collect() {
    this.set([...pools].reduce((n, p) => n + p.inUse(), 0));
  },
});
new Gauge({
  name: "switchyard_db_pool_waiting",
  help: "Callers waiting for a database connection",
  registers: [registry],
  collect() {
    this.set([...pools].reduce((n, p) => n + p.waiting(), 0));
  },
});

/**
 * A gauge that says whether something the process depends on holds now, as 1 or 0, read from the
 * parts that report it when scraped (0 when any of them says no), one series a value of `label`
 * (absent: one series). Returns how a part reports: it gets back its unreport.
 */
function holdsGauge(name: string, help: string, label?: string) {
  const reporters = new Map<string, Set<() => boolean>>();
  new Gauge({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [registry],
    collect() {
      this.reset();
      for (const [value, checks] of reporters)
        if (checks.size > 0) this.set(label ? { [label]: value } : {}, [...checks].every((check) => check()) ? 1 : 0);
    },
  });
  return (value: string, holds: () => boolean): (() => void) => {
    const set = reporters.get(value) ?? new Set();
    reporters.set(value, set);
    set.add(holds);
    return () => set.delete(holds);
  };
}

const redisConnected = holdsGauge(
  "switchyard_redis_connected",
  "1 while the process's Redis connection for `purpose` is up; 0 while it is not, and that purpose is counted in this process alone (each replica its own count)",
  "purpose",
);
/**
 * Reports whether a Redis connection of this process is up, by what it is for ("quotas", "login
 * counters"); returns the unreport. While it is not, that work is counted in the process alone.
 */
export const reportRedisConnected = (purpose: string, connected: () => boolean) => redisConnected(purpose, connected);

const revocationsFollowed = holdsGauge(
  "switchyard_revocations_followed",
  "1 while the process follows identity's revocation stream (synced); 0 while it cannot, and serves with the revocations it knows",
);
/** Reports whether this process follows identity's revocation stream now; returns the unreport. */
export const reportRevocationsFollowed = (following: () => boolean) => revocationsFollowed("", following);

const databaseReachable = holdsGauge(
  "switchyard_db_reachable",
  "1 while the process's database answered its last check (every 2 s; every 0.5 s while failing), 0 while it does not",
);
/** Reports whether this process's database answered its last check (database-readiness.ts); returns the unreport. */
export const reportDatabaseReachable = (reachable: () => boolean) => databaseReachable("", reachable);

export const idempotentReplays = new Counter({
  name: "switchyard_idempotent_replays_total",
  help: "Requests answered from a stored Idempotency-Key result instead of doing the work again, by operation",
  labelNames: ["operation"] as const,
  registers: [registry],
});

export const moneyStepMismatches = new Counter({
  name: "switchyard_orders_step_mismatches_total",
  help: "Money steps whose payment or refund, as payments answered it, was not the step's (amount, currency, reference, owner): not believed, the step failed safe",
  labelNames: ["step"] as const,
  registers: [registry],
});

// ---- events for partners (webhooks) ----------------------------------------------------------------------

export const webhookDeliveries = new Counter({
  name: "switchyard_webhook_deliveries_total",
  help: "Webhook delivery attempts, by what followed: delivered (a 2xx), retried (tried again later), failed (given up after 3 days)",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

export const webhookAttemptDuration = new LabeledHistogram({
  name: "switchyard_webhook_attempt_duration_seconds",
  help: "Webhook delivery attempts, from sending to the answer read (or the 10 s timeout), by result: 2xx, other_status, no_answer",
  labelNames: ["result"] as const,
  buckets: LATENCY_BUCKETS,
  registry,
});

const outboxes = new Set<() => Date | undefined>();
/** Reports when the oldest event a relay has not handed on yet was recorded; returns the unreport. */
export function reportOutbox(oldestUnrelayed: () => Date | undefined): () => void {
  outboxes.add(oldestUnrelayed);
  return () => outboxes.delete(oldestUnrelayed);
}
new Gauge({
  name: "switchyard_outbox_oldest_unrelayed_age_seconds",
  help: "How long the oldest event for partners has waited in the process's outbox to be relayed to the webhooks service (0: none waits)",
  registers: [registry],
  collect() {
    const now = Date.now();
    let age = 0;
    for (const oldest of outboxes) {
      const at = oldest();
      if (at) age = Math.max(age, (now - at.getTime()) / 1000);
    }
    this.set(age);
  },
});

// ---- per process ----------------------------------------------------------------------------------------

let processLabelled = false;
/**
 * Names this process in every metric (label `service`) and adds the standard process and Node.js
 * metrics (CPU, memory, GC, nodejs_eventloop_lag_*). Once per process.
 */
export function startProcessMetrics(service: string): void {
  if (processLabelled) return;
  processLabelled = true;
  registry.setDefaultLabels({ service });
  // The lag metrics' sampler wakes the process every `eventLoopMonitoringPrecision` ms, idle or not
  // (as the load-shedding guard's, load-shed.ts): 50 ms, not 20, still resolves the 200 ms the alerts
  // watch, with 20 wake-ups a second instead of 50 in every process.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 50 });
}

/** The status class label of an HTTP status: 2xx, 3xx, 4xx, 5xx. */
export function statusClass(status: number): string {
  return status >= 500 ? "5xx" : status >= 400 ? "4xx" : status >= 300 ? "3xx" : status >= 200 ? "2xx" : "1xx";
}

/** Writes the scrape (Prometheus text format) to an HTTP response. */
export async function writeMetrics(res: ServerResponse): Promise<void> {
  try {
    const body = await registry.metrics();
    res.writeHead(200, { "content-type": registry.contentType, "content-length": Buffer.byteLength(body) });
    res.end(body);
  } catch {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end("metrics collection failed\n");
  }
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * A service's metrics endpoint: GET /metrics on its own port (or an inherited listening socket), so
 * the scrape never competes with gRPC and the port can be opened to the scraper alone.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  listenFd?: number | undefined;
}): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    req.resume();
    if (req.url?.split("?")[0] === "/metrics" && (req.method === "GET" || req.method === "HEAD"))
      return void writeMetrics(res);
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found: GET /metrics\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if (options.listenFd !== undefined) server.listen({ fd: options.listenFd }, () => resolve());
    else server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

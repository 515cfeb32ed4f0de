// What one request costs each process (issue 34): the CPU time every process of the mesh spends on
// one read (GET /v1/payments/{id}), one write (POST /v1/payments with a fresh Idempotency-Key) and
// one paid order (POST /v1/orders/{id}/payment: orders → payments), and from it how many of each one
// core of that process buys — the figures a cluster is sized by. On the PostgreSQL server, the
// backends serving each service as well: found by application_name in pg_stat_activity, their CPU
// read in /proc when the server runs on this machine (said so when it does not). Redis, where the
// gateways count quotas, is shared with whatever else uses it: its CPU is not attributed.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import type { ServiceName } from "../scripts/mesh.js";
import { fire, type HttpTarget } from "./load/http-load.js";
import { cpuSeconds, watchCpu } from "./machine.js";
import { PAYMENT_BODY, startMeshFixture, type MeshFixture } from "./mesh-fixture.js";

export type RequestKind = "read" | "write" | "pay";
export const REQUEST_KINDS: Record<RequestKind, string> = {
  read: "GET /v1/payments/{id}",
  write: "POST /v1/payments",
  pay: "POST /v1/orders/{id}/payment",
};

/** The share of a core the sizing example leaves usable: headroom, since a core kept busier queues every request (section C). */
export const SIZING_EXAMPLE = { readsPerSec: 1_000, usableShare: 0.7 } as const;

export interface KindCost {
  requests: number;
  seconds: number;
  reqPerSec: number;
  /** CPU ms per request of each process: the mesh's by name, each service's PostgreSQL backends as "PostgreSQL (payments)". */
  cpuMsPerRequest: Record<string, number>;
  /** Each process's CPU time over the wall time: the share of one core it kept busy. */
  coreShare: Record<string, number>;
  loadGeneratorCpuMsPerRequest: number | undefined;
  otherCpuPct: number | undefined;
  /** Database backends that ended while measured (a pool closing an idle connection): their CPU in the window is missing. */
  backendsEnded?: number;
}

export interface RequestCostResult {
  engine: "pglite" | "postgres";
  /** Quotas counted in Redis (REDIS_URL), as deployed. */
  redis: boolean;
  /** How the PostgreSQL backends' CPU was read, or why it was not. */
  backends: string;
  kinds: Partial<Record<RequestKind, KindCost | { error: string }>>;
}

export interface RequestCostOptions {
  databaseUrl?: string | undefined;
  redisUrl?: string | undefined;
  connections: number;
  seconds: number;
  warmupSeconds: number;
}

const ORDER_BODY = JSON.stringify({ currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] });
const PAY_BODY = JSON.stringify({ source: "tok_visa" });
const backendName = (service: string) => `PostgreSQL (${service})`;

/** Each service's PostgreSQL backends: pid → its service and CPU seconds so far. */
type Backends = Map<number, { service: string; seconds: number }>;

/** Reads the mesh's backends off pg_stat_activity and /proc; a string says why they cannot be read here. */
async function backendsOf(client: pg.Client, applications: Record<ServiceName, string>): Promise<Backends | string> {
  const serviceOf = new Map(Object.entries(applications).map(([service, name]) => [name, service]));
  const { rows } = await client.query<{ pid: number; application_name: string }>(
    "SELECT pid, application_name FROM pg_stat_activity WHERE application_name = ANY($1::text[])",
    [[...serviceOf.keys()]],
  );
  const backends: Backends = new Map();
  for (const { pid, application_name } of rows) {
    let comm: string;
    try {
      comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    } catch {
      return `not read: backend ${pid} is not a process here (the PostgreSQL server runs on another machine or in another pid namespace)`;
    }
    if (comm !== "postgres")
      return `not read: process ${pid} here is "${comm}", not the server's backend (the server runs elsewhere)`;
    backends.set(pid, { service: serviceOf.get(application_name)!, seconds: cpuSeconds(pid) });
  }
  return backends;
}

/** CPU ms per service's backends between two readings: a backend that started meanwhile counts whole, one that ended is lost (counted). */
function backendUse(before: Backends, after: Backends): { byService: Record<string, number>; ended: number } {
  const byService: Record<string, number> = {};
  for (const [pid, now] of after)
    byService[now.service] = (byService[now.service] ?? 0) + (now.seconds - (before.get(pid)?.seconds ?? 0)) * 1000;
  return { byService, ended: [...before.keys()].filter((pid) => !after.has(pid)).length };
}

/** Makes `count` pending orders of one BOOK-1 each, a few at a time (not measured); returns their ids. */
async function createOrders(mesh: MeshFixture, count: number): Promise<string[]> {
  const ids: string[] = [];
  const headers = { authorization: `Bearer ${mesh.token}`, "content-type": "application/json" };
  const worker = async () => {
    while (ids.length < count) {
      const res = await fetch(`${mesh.gatewayUrl}/v1/orders`, {
        method: "POST",
        headers: { ...headers, "idempotency-key": randomUUID() },
        body: ORDER_BODY,
      });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`POST /v1/orders → ${res.status}: ${text}`);
      ids.push(String((JSON.parse(text) as { id: unknown }).id));
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return ids;
}

/** One kind of request: warmed up, then measured — the mesh's processes and (when readable) the database backends. */
async function measureKind(
  mesh: MeshFixture,
  target: HttpTarget,
  options: RequestCostOptions,
  database: { client: pg.Client; applications: Record<ServiceName, string> } | undefined,
  amounts?: { warmup: number; measured: number },
): Promise<KindCost & { backends?: string }> {
  await fire(target, options.connections, options.warmupSeconds, amounts?.warmup);
  const before = database && (await backendsOf(database.client, database.applications));
  const cpu = watchCpu(mesh.processes);
  const started = performance.now();
  const result = await fire(target, options.connections, options.seconds, amounts?.measured);
  const wallMs = performance.now() - started;
  const use = cpu();
  const after = database && (await backendsOf(database.client, database.applications));
  const cpuMs: Record<string, number> = { ...use.byProcessMs };
  let backends: string | undefined;
  let backendsEnded: number | undefined;
  if (typeof before === "string" || typeof after === "string")
    backends = typeof before === "string" ? before : (after as string);
  else if (before && after) {
    const { byService, ended } = backendUse(before, after);
    for (const [service, ms] of Object.entries(byService)) cpuMs[backendName(service)] = ms;
    backends = "read from /proc, found by application_name in pg_stat_activity";
    backendsEnded = ended;
  }
  const perRequest = (ms: number) => ms / result.requests;
  return {
    requests: result.requests,
    seconds: result.seconds,
    reqPerSec: result.requests / result.seconds,
    cpuMsPerRequest: Object.fromEntries(Object.entries(cpuMs).map(([name, ms]) => [name, perRequest(ms)])),
    coreShare: Object.fromEntries(Object.entries(cpuMs).map(([name, ms]) => [name, ms / wallMs])),
    loadGeneratorCpuMsPerRequest: use.selfCpuMs === undefined ? undefined : perRequest(use.selfCpuMs),
    otherCpuPct: use.otherCpuPct,
    ...(backendsEnded === undefined ? {} : { backendsEnded }),
    ...(backends ? { backends } : {}),
  };
}

/** The three kinds of request against one fresh mesh, on PGlite or (with databaseUrl) the PostgreSQL server. */
export async function measureRequestCost(options: RequestCostOptions): Promise<RequestCostResult> {
  const engine = options.databaseUrl ? "postgres" : "pglite";
  const result: RequestCostResult = {
    engine,
    redis: options.redisUrl !== undefined,
    backends: engine === "pglite" ? "none: PGlite runs inside each service's process" : "not read",
    kinds: {},
  };
  const mesh = await startMeshFixture({ limit: "none", databaseUrl: options.databaseUrl, redisUrl: options.redisUrl });
  let client: pg.Client | undefined;
  try {
    if (options.databaseUrl && mesh.databaseApplications) {
      client = new pg.Client({ connectionString: options.databaseUrl, application_name: "switchyard-bench-observer" });
      await client.connect();
    }
    const database =
      client && mesh.databaseApplications ? { client, applications: mesh.databaseApplications } : undefined;
    const auth = { authorization: `Bearer ${mesh.token}` };
    const run = async (kind: RequestKind, measure: () => Promise<KindCost & { backends?: string }>) => {
      try {
        const { backends, ...cost } = await measure();
        if (backends) result.backends = backends;
        result.kinds[kind] = cost;
      } catch (err) {
        result.kinds[kind] = { error: (err instanceof Error ? err.message : String(err)).split("\n")[0]! };
      }
    };
    await run("read", () =>
      measureKind(mesh, { url: `${mesh.gatewayUrl}/v1/payments/${mesh.paymentId}`, headers: auth }, options, database),
    );
    await run("write", () =>
      measureKind(
        mesh,
        {
          url: `${mesh.gatewayUrl}/v1/payments`,
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: PAYMENT_BODY,
          perRequestHeaders: () => ({ "idempotency-key": randomUUID() }),
          expectStatus: 201,
        },
        options,
        database,
      ),
    );
    // Each order is paid once: as many pending orders as the run pays, made first, and a count of
    // payments (not a duration) for each part — scaled with the run's seconds.
    const amounts = { warmup: Math.max(50, 25 * options.warmupSeconds), measured: Math.max(150, 40 * options.seconds) };
    await run("pay", async () => {
      const orders = await createOrders(mesh, amounts.warmup + amounts.measured + 2 * options.connections);
      let next = 0;
      const path = () => `/v1/orders/${orders[next++ % orders.length]}/payment`;
      return measureKind(
        mesh,
        {
          url: `${mesh.gatewayUrl}/v1/orders/0/payment`,
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: PAY_BODY,
          perRequestPath: path,
          expectStatus: 201,
        },
        options,
        database,
        amounts,
      );
    });
  } finally {
    await client?.end().catch(() => {});
    await mesh.stop();
  }
  return result;
}

const PROCESS_ORDER = ["gateway", "identity", "payments", "orders", "content"];

/** The processes of a result, the mesh's first (in the request's order), then the database backends. */
export function processesOf(result: RequestCostResult): string[] {
  const names = new Set<string>();
  for (const cost of Object.values(result.kinds))
    if (cost && !("error" in cost)) Object.keys(cost.cpuMsPerRequest).forEach((n) => names.add(n));
  const rank = (n: string) =>
    PROCESS_ORDER.includes(n)
      ? PROCESS_ORDER.indexOf(n)
      : PROCESS_ORDER.length + PROCESS_ORDER.findIndex((p) => n === backendName(p));
  return [...names].sort((a, b) => rank(a) - rank(b));
}

/** Replicas of each process for a rate: ⌈rate × CPU ms per request ÷ (1000 × usable share of a core)⌉. */
export function replicasFor(rate: number, cpuMsPerRequest: number, usableShare: number): number {
  return Math.max(1, Math.ceil((rate * cpuMsPerRequest) / (1000 * usableShare)));
}

export function formatRequestCost(result: RequestCostResult): string[] {
  const engine =
    result.engine === "pglite" ? "embedded PGlite" : `the PostgreSQL server${result.redis ? ", quotas in Redis" : ""}`;
  const out = [`  on ${engine} — PostgreSQL backends: ${result.backends}`];
  const kinds = Object.keys(REQUEST_KINDS) as RequestKind[];
  for (const kind of kinds) {
    const cost = result.kinds[kind];
    if (cost && "error" in cost) out.push(`  ${REQUEST_KINDS[kind]}: FAILED: ${cost.error}`);
  }
  const ok = (kind: RequestKind) => {
    const cost = result.kinds[kind];
    return cost && !("error" in cost) ? cost : undefined;
  };
  const names = processesOf(result);
  const header = [
    "process",
    ...kinds.map((k) => `${k} CPU ms`),
    ...kinds.map((k) => `${k}s/s per core`),
    "core busy (read)",
  ];
  const ms = (kind: RequestKind, name: string) => ok(kind)?.cpuMsPerRequest[name];
  const rows = names.map((name) => [
    name,
    ...kinds.map((k) => (ms(k, name) === undefined ? "–" : ms(k, name)!.toFixed(3))),
    ...kinds.map((k) => (ms(k, name) ? Math.round(1000 / ms(k, name)!).toLocaleString("en") : "–")),
    ok("read")?.coreShare[name] === undefined ? "–" : `${(100 * ok("read")!.coreShare[name]!).toFixed(0)} %`,
  ]);
  const total = (k: RequestKind) => ok(k) && Object.values(ok(k)!.cpuMsPerRequest).reduce((a, b) => a + b, 0);
  rows.push([
    "all processes",
    ...kinds.map((k) => total(k)?.toFixed(3) ?? "–"),
    ...kinds.map((k) => (total(k) ? Math.round(1000 / total(k)!).toLocaleString("en") : "–")),
    "",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    "  " + cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  out.push(line(header), line(widths.map((w) => "─".repeat(w))), ...rows.map(line));
  const ended = (k: RequestKind) =>
    ok(k)?.backendsEnded ? `, ${ok(k)!.backendsEnded} idle backend(s) closed meanwhile` : "";
  out.push(
    `  measured at: ${kinds.map((k) => (ok(k) ? `${k} ${ok(k)!.reqPerSec.toFixed(0)}/s (other work ${ok(k)!.otherCpuPct?.toFixed(0) ?? "?"} % of the machine${ended(k)})` : `${k} –`)).join("; ")}`,
  );
  const read = ok("read");
  if (read) {
    const { readsPerSec, usableShare } = SIZING_EXAMPLE;
    const mesh = names
      .filter((name) => PROCESS_ORDER.includes(name))
      .map((name) => `${name} ${replicasFor(readsPerSec, read.cpuMsPerRequest[name] ?? 0, usableShare)}`);
    const databaseMs = names
      .filter((name) => !PROCESS_ORDER.includes(name))
      .reduce((sum, name) => sum + (read.cpuMsPerRequest[name] ?? 0), 0);
    const database =
      result.engine === "postgres" && databaseMs > 0
        ? `; the PostgreSQL server's backends ${((readsPerSec * databaseMs) / (1000 * usableShare)).toFixed(2)} cores`
        : "";
    out.push(
      `  sizing example (docs/capacity.md): ${readsPerSec.toLocaleString("en")} reads/s with ${100 * usableShare} % of each core usable → replicas = ⌈rate × CPU ms per read ÷ (1000 × ${usableShare})⌉: ${mesh.join(", ")}${database}`,
    );
  }
  return out;
}

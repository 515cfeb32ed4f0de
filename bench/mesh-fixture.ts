// The real mesh (every service and the gateway as separate processes, embedded storage or a
// PostgreSQL server, demo users) with what the read and write scenarios need: a bearer token and an existing payment.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { NO_SHEDDING, SERVICES, startMesh, type Mesh, type ServiceName } from "../scripts/mesh.js";
import { track } from "./processes.js";
import { serverSchemas } from "./server-schemas.js";

export const PAYMENT_BODY = JSON.stringify({ amount: 1250, currency: "EUR", source: "tok_visa" });

export interface MeshFixture {
  readonly gatewayUrl: string;
  /** Every gateway replica's URL (the first is gatewayUrl). */
  readonly gatewayUrls: string[];
  readonly token: string;
  readonly paymentId: string;
  readonly docId: string;
  /** The gateway, payments and identity process ids (for profiling). */
  readonly pids: Record<ServiceName, number | undefined>;
  /** Every process, replicas too: a service's first by its name, the others "payments 2", "payments 3", … */
  readonly processes: Record<string, number | undefined>;
  /** On a PostgreSQL server: each service's application_name there (PGAPPNAME), which finds its backends in pg_stat_activity. */
  readonly databaseApplications: Record<ServiceName, string> | undefined;
  /** What the mesh's processes wrote (for a failed scenario's report). */
  readonly logs: string[];
  /** Stops one process (SIGTERM) and waits for it to exit. */
  stopService(name: ServiceName): Promise<void>;
  /** Starts a stopped process again, with the same settings and port, and waits until it serves. */
  restartService(name: ServiceName): Promise<void>;
  stop(): Promise<void>;
}

async function postJson(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST ${url} → ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * The gateway's concurrency limit: "none" (capacity runs) a fixed limit far above the load, so the
 * closed loop's 50 connections are served, not shed; "adaptive" (overload) its default adaptive
 * limit; a number: pinned there.
 */
export type GatewayLimit = "none" | "adaptive" | number;

function limitEnv(limit: GatewayLimit): Record<string, string> {
  if (limit === "adaptive") return {};
  if (limit === "none") return NO_SHEDDING;
  const pinned = String(limit);
  return { GATEWAY_CONCURRENCY_INITIAL: pinned, GATEWAY_CONCURRENCY_MIN: pinned, GATEWAY_CONCURRENCY_MAX: pinned };
}

export interface MeshFixtureOptions {
  limit: GatewayLimit;
  env?: NodeJS.ProcessEnv;
  /** Every service on this PostgreSQL server (fresh schemas, dropped at stop); unset: embedded PGlite. */
  databaseUrl?: string | undefined;
  /** The gateway's quotas (and identity's login counters) in this Redis, as deployed; unset: counted per process. */
  redisUrl?: string | undefined;
  /** Processes per service (default 1). */
  replicas?: Partial<Record<ServiceName, number>>;
}

/** Deletes this run's keys (the login counters' known addresses live 30 days) from a Redis others use too. */
async function forgetKeys(redisUrl: string, pattern: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    for await (const keys of redis.scanStream({ match: pattern, count: 500 }) as AsyncIterable<string[]>)
      if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

const replicaName = (name: ServiceName, replica: number) => (replica === 0 ? name : `${name} ${replica + 1}`);

export async function startMeshFixture({
  limit,
  env = {},
  databaseUrl,
  redisUrl,
  replicas = {},
}: MeshFixtureOptions): Promise<MeshFixture> {
  const dataDir = await mkdtemp(join(tmpdir(), "switchyard-bench-"));
  const server = databaseUrl ? serverSchemas(databaseUrl, "bench") : undefined;
  const run = randomUUID().slice(0, 8);
  // This run's own counters in a Redis that others may share.
  const redis = redisUrl
    ? {
        REDIS_URL: redisUrl,
        GATEWAY_RATE_LIMIT_PREFIX: `switchyard:bench:${run}:rl`,
        LOGIN_THROTTLE_PREFIX: `switchyard:bench:${run}:login`,
      }
    : { REDIS_URL: "" };
  const names = Object.keys(SERVICES) as ServiceName[];
  const databaseApplications = databaseUrl
    ? (Object.fromEntries(names.map((n) => [n, `switchyard-bench-${run}-${n}`])) as Record<ServiceName, string>)
    : undefined;
  let mesh: Mesh | undefined;
  const stop = async () => {
    await mesh?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await server?.drop();
    // Best effort: what is left expires in time.
    if (redisUrl) await forgetKeys(redisUrl, `switchyard:bench:${run}:*`).catch(() => {});
  };
  try {
    // Embedded storage unless a server is given, and a quota the load never reaches.
    mesh = await startMesh({
      dataDir,
      demoData: true,
      output: "collect",
      replicas,
      env: {
        DATABASE_URL: "",
        // The most a credential may make (10⁶) per second: document reads from the edge cache reach
        // 24,000 a second here, and a start of the same-work comparison spent 10⁶ a minute on one token.
        GATEWAY_RATE_LIMIT: "1000000",
        GATEWAY_RATE_WINDOW_SECONDS: "1",
        LOG_LEVEL: "warn",
        ...redis,
        ...server?.env,
        ...limitEnv(limit),
        ...env,
      },
      ...(databaseApplications
        ? { envFor: Object.fromEntries(names.map((n) => [n, { PGAPPNAME: databaseApplications[n] }])) }
        : {}),
    });
    const all = names.flatMap((name) => mesh!.replicaPorts[name].map((_, r) => [name, r] as const));
    for (const [name, r] of all) track(mesh.process(name, r));
    const url = mesh.gatewayUrl;
    const session = await postJson(
      `${url}/v1/tenants/acme/sessions`,
      JSON.stringify({ email: "alice@acme.test", password: "demo-password" }),
    );
    const token = String(session.access_token);
    const payment = await postJson(`${url}/v1/payments`, PAYMENT_BODY, {
      authorization: `Bearer ${token}`,
      "idempotency-key": randomUUID(),
    });
    const doc = await postJson(
      `${url}/v1/docs`,
      JSON.stringify({ title: "Bench", body: "a document read under load" }),
      { authorization: `Bearer ${token}` },
    );
    const m = mesh;
    return {
      gatewayUrl: url,
      gatewayUrls: m.replicaPorts.gateway.map((port) => `http://127.0.0.1:${port}`),
      token,
      paymentId: String(payment.id),
      docId: String(doc.id),
      pids: Object.fromEntries(names.map((n) => [n, m.process(n).pid])) as Record<ServiceName, number | undefined>,
      processes: Object.fromEntries(all.map(([n, r]) => [replicaName(n, r), m.process(n, r).pid])),
      databaseApplications,
      logs: m.logs,
      stopService: (name) => m.stopService(name),
      restartService: async (name) => {
        await m.restartService(name);
        track(m.process(name));
      },
      stop,
    };
  } catch (err) {
    const logs = mesh?.logs.join("").slice(-2_000) ?? "";
    await stop();
    throw new Error(
      `the mesh could not be prepared: ${err instanceof Error ? err.message : String(err)}${logs ? `\n${logs}` : ""}`,
    );
  }
}

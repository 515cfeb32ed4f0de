// The real mesh (every service and the gateway as separate processes, embedded storage or a
// PostgreSQL server, demo users) with what the read and write scenarios need: a bearer token and an existing payment.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NO_SHEDDING, SERVICES, startMesh, type Mesh, type ServiceName } from "../scripts/mesh.js";
import { track } from "./processes.js";
import { serverSchemas } from "./server-schemas.js";

export const PAYMENT_BODY = JSON.stringify({ amount: 1250, currency: "EUR", source: "tok_visa" });

export interface MeshFixture {
  readonly gatewayUrl: string;
  readonly token: string;
  readonly paymentId: string;
  readonly docId: string;
  /** The gateway, payments and identity process ids (for profiling). */
  readonly pids: Record<ServiceName, number | undefined>;
  /** What the mesh's processes wrote (for a failed scenario's report). */
  readonly logs: string[];
  stop(): Promise<void>;
}

async function postJson(url: string, body: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
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

/** With `databaseUrl`, every service on that PostgreSQL server (fresh schemas, dropped at stop); else embedded PGlite. */
export async function startMeshFixture({ limit, env = {}, databaseUrl }: { limit: GatewayLimit; env?: NodeJS.ProcessEnv; databaseUrl?: string | undefined }): Promise<MeshFixture> {
  const dataDir = await mkdtemp(join(tmpdir(), "switchyard-bench-"));
  const server = databaseUrl ? serverSchemas(databaseUrl, "bench") : undefined;
  let mesh: Mesh | undefined;
  const stop = async () => {
    await mesh?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await server?.drop();
  };
  try {
    // Embedded storage, in-process rate-limit counters and a quota the load never reaches.
    mesh = await startMesh({
      dataDir,
      demoData: true,
      output: "collect",
      env: { DATABASE_URL: "", REDIS_URL: "", GATEWAY_RATE_LIMIT: "1000000", LOG_LEVEL: "warn", ...server?.env, ...limitEnv(limit), ...env },
    });
    const names = Object.keys(SERVICES) as ServiceName[];
    for (const name of names) track(mesh.process(name));
    const url = mesh.gatewayUrl;
    const session = await postJson(`${url}/v1/tenants/acme/sessions`, JSON.stringify({ email: "alice@acme.test", password: "demo-password" }));
    const token = String(session.access_token);
    const payment = await postJson(`${url}/v1/payments`, PAYMENT_BODY, { authorization: `Bearer ${token}`, "idempotency-key": randomUUID() });
    const doc = await postJson(`${url}/v1/docs`, JSON.stringify({ title: "Bench", body: "a document read under load" }), { authorization: `Bearer ${token}` });
    const m = mesh;
    return {
      gatewayUrl: url,
      token,
      paymentId: String(payment.id),
      docId: String(doc.id),
      pids: Object.fromEntries(names.map((n) => [n, m.process(n).pid])) as Record<ServiceName, number | undefined>,
      logs: m.logs,
      stop,
    };
  } catch (err) {
    const logs = mesh?.logs.join("").slice(-2_000) ?? "";
    await stop();
    throw new Error(`the mesh could not be prepared: ${err instanceof Error ? err.message : String(err)}${logs ? `\n${logs}` : ""}`);
  }
}

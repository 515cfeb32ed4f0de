// Helpers for the end-to-end tests: one mesh per file over real HTTP (global fetch), a recording
// JSON client, logins for the demo users, and the error-envelope assertion every test leans on.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { NO_SHEDDING, SERVICES, startMesh, type Mesh, type MeshOptions, type ServiceName } from "../../scripts/mesh.js";
import { seedPgliteDataDirs } from "../../services/platform/test/support/databases.js";
import { forgetRedisKeys } from "./redis-keys.js";

export const DEMO_PASSWORD = "demo-password";
export const ALICE = { tenant: "acme", email: "alice@acme.test" } as const; // admin of acme
export const BOB = { tenant: "acme", email: "bob@acme.test" } as const; // member of acme
export const CAROL = { tenant: "globex", email: "carol@globex.test" } as const; // admin of globex

/** The demo catalog (services/content/src/demo-data.ts): unit prices in cents, every item in EUR. */
export const DEMO_CATALOG: Readonly<Record<string, number>> = {
  "BOOK-1": 1_500,
  "MUG-1": 900,
  "PEN-1": 2_500,
  "SHIRT-1": 1_900,
  "STICKER-1": 300,
};

/** Every process of the mesh (identity, payments, gateway, and whatever joins them). */
export const MESH_PROCESSES = Object.keys(SERVICES) as ServiceName[];

/** A fresh Idempotency-Key. */
export const newKey = (): string => randomUUID();

/** A unique suffix for emails and sources, so reruns and parallel tests never collide. */
export const unique = (): string => randomUUID().slice(0, 8);

export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed body; undefined when it is empty or not JSON. */
  readonly json: any;
  /** Wall-clock milliseconds from sending to the end of the body. */
  readonly ms: number;
}

/**
 * Waits until a gateway reaches a restarted service again. A call waits for a reachable replica
 * within its deadline (wait-for-ready), and a channel reconnects within 1 s (`grpc/client.ts`), so this
 * only matters for a read with a deadline shorter than that: it answers 503 UPSTREAM_UNREACHABLE (never
 * sent), or 502 UPSTREAM_UNAVAILABLE (cut), which a client retries.
 */
export async function untilReachable(read: () => Promise<ApiResponse>, withinMs = 10_000): Promise<void> {
  for (const until = Date.now() + withinMs; ; await sleep(50)) {
    const res = await read();
    const code = res.json?.code;
    if (code !== "UPSTREAM_UNAVAILABLE" && code !== "UPSTREAM_UNREACHABLE") return;
    if (Date.now() > until) throw new Error(`still ${res.status} ${String(code)} after ${withinMs} ms`);
  }
}

export interface RequestOptions {
  token?: string | undefined;
  /** A value to send as JSON (content-type application/json). */
  json?: unknown;
  /** Bytes or text sent as they are (content-type only as given in headers). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** Idempotency-Key header. */
  key?: string;
  signal?: AbortSignal;
}

/** A JSON client for the gateway that records every response body it has seen. */
export class Api {
  /** Every response text received, for the "nothing secret ever leaves" checks. */
  readonly seen: string[] = [];

  constructor(readonly baseUrl: string) {}

  async request(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (options.key !== undefined) headers["idempotency-key"] = options.key;
    let body: string | Uint8Array | undefined;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers["content-type"] ??= "application/json";
    } else if (options.raw !== undefined) {
      body = typeof options.raw === "string" ? options.raw : new Uint8Array(options.raw);
    }
    const started = performance.now();
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body,
      redirect: "manual",
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const text = await res.text();
    const ms = performance.now() - started;
    this.seen.push(text);
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json, ms };
  }

  get(path: string, options?: RequestOptions) {
    return this.request("GET", path, options);
  }
  post(path: string, options?: RequestOptions) {
    return this.request("POST", path, options);
  }
  delete(path: string, options?: RequestOptions) {
    return this.request("DELETE", path, options);
  }

  /** Logs in and returns the access token (asserting the 201). */
  async login(who: { tenant: string; email: string }, password = DEMO_PASSWORD): Promise<string> {
    const res = await this.post(`/v1/tenants/${who.tenant}/sessions`, { json: { email: who.email, password } });
    expect(res.status, `login of ${who.email}: ${res.text}`).to.equal(201);
    expect(res.json.access_token).to.be.a("string").and.not.equal("");
    return res.json.access_token as string;
  }

  /** Every item of a cursor list, walking next_cursor until it is null. */
  async listAll(path: string, token: string, limit = 100): Promise<any[]> {
    const items: unknown[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 1_000; pages++) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (cursor) query.set("cursor", cursor);
      const res = await this.get(`${path}?${query.toString()}`, { token });
      expect(res.status, res.text).to.equal(200);
      items.push(...(res.json.items as unknown[]));
      cursor = res.json.next_cursor as string | null;
      if (cursor === null) return items;
    }
    throw new Error(`${path}: more than 1000 pages`);
  }
}

/**
 * The codes whose error body adds `details`, with the keys (and JSON types) it holds — exactly those
 * (the document's Conventions: PRICE_CHANGED the current sku, unit_price and currency; STEP_IN_PROGRESS
 * the step; UNKNOWN_SKU the sku; CURRENCY_MISMATCH the sku and its currency; NOT_ACCEPTABLE the published
 * media types). Every other error body is
 * exactly {error, code}.
 */
export const ERROR_DETAILS: Readonly<Record<string, Readonly<Record<string, "string" | "integer">>>> = {
  PRICE_CHANGED: { sku: "string", unit_price: "integer", currency: "string" },
  STEP_IN_PROGRESS: { step: "string" },
  UNKNOWN_SKU: { sku: "string" },
  CURRENCY_MISMATCH: { sku: "string", currency: "string" },
  NOT_ACCEPTABLE: { published: "string" },
};

/**
 * What is wrong with an error body, or undefined when it is the envelope: {error, code} with a
 * non-empty message, plus `details` — of exactly the declared keys and types — for the codes of
 * ERROR_DETAILS and for no other code.
 */
export function errorEnvelopeProblem(body: unknown): string | undefined {
  if (!body || typeof body !== "object" || Array.isArray(body)) return "the error body is not a JSON object";
  const { error, code, details } = body as { error?: unknown; code?: unknown; details?: unknown };
  if (typeof error !== "string" || error === "") return "an empty or non-string error message";
  if (typeof code !== "string" || !/^[A-Z_]+$/.test(code)) return `code ${JSON.stringify(code)} is not a machine code`;
  const declared = ERROR_DETAILS[code];
  const keys = Object.keys(body).sort();
  const expectedKeys = declared ? ["code", "details", "error"] : ["code", "error"];
  if (keys.join(",") !== expectedKeys.join(","))
    return `body keys ${JSON.stringify(keys)}, expected exactly ${JSON.stringify(expectedKeys)} for ${code}`;
  if (!declared) return undefined;
  if (!details || typeof details !== "object" || Array.isArray(details)) return `details of ${code} is not an object`;
  const detailKeys = Object.keys(details).sort();
  if (detailKeys.join(",") !== Object.keys(declared).sort().join(","))
    return `details keys ${JSON.stringify(detailKeys)} of ${code}, expected ${JSON.stringify(Object.keys(declared).sort())}`;
  for (const [key, type] of Object.entries(declared)) {
    const value = (details as Record<string, unknown>)[key];
    if (type === "string" ? typeof value !== "string" || value === "" : !Number.isSafeInteger(value))
      return `details.${key} of ${code} is not a${type === "string" ? " non-empty string" : "n integer"}: ${JSON.stringify(value)}`;
  }
  return undefined;
}

/**
 * Status, JSON content type and the error envelope {error: string, code} — nothing else in it but,
 * for the codes of ERROR_DETAILS, their `details` (equal to `details` when it is given).
 */
export function expectError(
  res: ApiResponse,
  status: number,
  code: string,
  details?: Record<string, string | number>,
): void {
  expect(res.status, `status of ${res.text}`).to.equal(status);
  expect(res.headers.get("content-type") ?? "", "content-type").to.match(/^application\/json\b/);
  expect(res.json, `body ${res.text}`).to.be.an("object");
  expect(res.json.code, `code of ${res.text}`).to.equal(code);
  expect(errorEnvelopeProblem(res.json), `envelope of ${res.text}`).to.equal(undefined);
  if (details !== undefined) expect(res.json.details, `details of ${res.text}`).to.deep.equal(details);
}

/** A 401 must tell the client how to authenticate. */
export function expectUnauthenticated(res: ApiResponse, code = "UNAUTHENTICATED"): void {
  expectError(res, 401, code);
  expect(res.headers.get("www-authenticate") ?? "", "WWW-Authenticate").to.match(/^Bearer\b/);
}

export interface E2eMesh {
  mesh: Mesh;
  api: Api;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * One mesh for a test file: a fresh data directory, demo data, embedded storage (DATABASE_URL is
 * blanked so a CI server in the parent environment is not used), output collected in mesh.logs.
 */
export async function startE2eMesh(
  name: string,
  extra: Pick<MeshOptions, "env" | "envFor" | "envForReplica" | "replicas" | "metrics"> = {},
): Promise<E2eMesh> {
  const dataDir = mkdtempSync(join(tmpdir(), `switchyard-e2e-${name}-`));
  // Counters in a shared Redis (REDIS_URL in CI) are this mesh's own, never another run's.
  const redisPrefixes = [
    extra.env?.GATEWAY_RATE_LIMIT_PREFIX ?? `switchyard:test:${name}:${randomUUID()}:rl`,
    extra.env?.LOGIN_THROTTLE_PREFIX ?? `switchyard:test:${name}:${randomUUID()}:login`,
  ] as const;
  let mesh: Mesh;
  try {
    // Embedded databases initialised once per test run, not once per process of every mesh.
    await seedPgliteDataDirs(dataDir, ["identity", "payments", "orders", "content", "webhooks"]);
    mesh = await startMesh({
      dataDir,
      demoData: true,
      output: "collect",
      // Tests make many requests with one token, some in bursts, and fail logins on purpose, all from
      // 127.0.0.1: a quota, a concurrency limit, a login throttle and services' event-loop shedding
      // that never bite, except in the tests of rate limits, shedding and login throttling (a full
      // parallel run once lagged payments' loop past the half threshold at which it sheds a later page).
      env: {
        DATABASE_URL: "",
        LOG_LEVEL: "info",
        GATEWAY_RATE_LIMIT: "1000000",
        LOGIN_FAILURES_ALLOWED: "1000",
        SHED_EVENT_LOOP_DELAY_MS: "0",
        GATEWAY_RATE_LIMIT_PREFIX: redisPrefixes[0],
        LOGIN_THROTTLE_PREFIX: redisPrefixes[1],
        ...NO_SHEDDING,
        ...extra.env,
      },
      ...(extra.envFor ? { envFor: extra.envFor } : {}),
      ...(extra.envForReplica ? { envForReplica: extra.envForReplica } : {}),
      ...(extra.replicas ? { replicas: extra.replicas } : {}),
      ...(extra.metrics ? { metrics: extra.metrics } : {}),
    });
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  let stopped = false;
  return {
    mesh,
    api: new Api(mesh.gatewayUrl),
    dataDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await mesh.stop();
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
        // A login's known address lives 30 days: a shared Redis keeps none of this mesh's counters.
        const redisUrl = extra.env?.REDIS_URL ?? process.env.REDIS_URL;
        if (redisUrl) await forgetRedisKeys(redisUrl, redisPrefixes).catch(() => {});
      }
    },
  };
}

/** The services that keep data, each in a schema of its own on a shared PostgreSQL server. */
const SCHEMA_SERVICES = ["identity", "payments", "orders", "content", "webhooks"] as const;

export interface ServerE2eMesh extends E2eMesh {
  /** A service's schema on the server (`<prefix>_<service>`), for a test that reads its tables. */
  schemaOf(service: (typeof SCHEMA_SERVICES)[number]): string;
}

/**
 * A mesh whose services keep their data in fresh schemas of one PostgreSQL server — so that replicas
 * of a service share it (embedded storage is one process's own) — with demo data, dropped at stop.
 */
export async function startE2eMeshOnServer(
  name: string,
  databaseUrl: string,
  extra: Parameters<typeof startE2eMesh>[1] = {},
): Promise<ServerE2eMesh> {
  const prefix = `t_${randomBytes(4).toString("hex")}`;
  const schemaOf = (service: string) => `${prefix}_${service}`;
  const env = await startE2eMesh(name, {
    ...extra,
    env: {
      DATABASE_URL: databaseUrl,
      ...Object.fromEntries(SCHEMA_SERVICES.map((s) => [`${s.toUpperCase()}_DB_SCHEMA`, schemaOf(s)])),
      SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      DEMO_DATA_FORCE: "true",
      ...extra.env,
    },
  });
  return {
    ...env,
    schemaOf,
    async stop() {
      await env.stop();
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      try {
        for (const s of SCHEMA_SERVICES) await admin.query(`DROP SCHEMA IF EXISTS ${schemaOf(s)} CASCADE`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** base64url of a JSON value (for hand-made JWT parts). */
export function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

/** The decoded payload of a JWT (no verification). */
export function jwtPayload(token: string): Record<string, unknown> {
  const part = token.split(".")[1];
  if (part === undefined) throw new Error("not a JWT");
  return JSON.parse(Buffer.from(part, "base64url").toString("utf8")) as Record<string, unknown>;
}

// Starts the mesh as separate processes (identity, payments, orders, content, gateway), waits until every part is
// healthy, and stops it cleanly. `npm start`, the end-to-end tests and the benchmark all use it.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

export const SERVICES = {
  identity: "services/identity/src/main.ts",
  payments: "services/payments/src/main.ts",
  orders: "services/orders/src/main.ts",
  content: "services/content/src/main.ts",
  gateway: "gateway/src/main.ts",
} as const;
export type ServiceName = keyof typeof SERVICES;

/**
 * Gateway settings for a fixed concurrency limit far above any load a test or a capacity
 * measurement brings: no shedding (the adaptive limit is exercised where it is the subject).
 */
export const NO_SHEDDING = { GATEWAY_CONCURRENCY_INITIAL: "10000", GATEWAY_CONCURRENCY_MIN: "10000", GATEWAY_CONCURRENCY_MAX: "10000" } as const;

export interface MeshOptions {
  /** Fixed ports (npm start); free ones are picked when absent. */
  ports?: Partial<Record<ServiceName, number>>;
  dataDir: string;
  /** Seed the demo data: embedded storage only (with DATABASE_URL in `env` the services refuse it, unless DEMO_DATA_FORCE=true). */
  demoData?: boolean;
  /** Extra environment for every process (DATABASE_URL, LOG_LEVEL, …) and per process. */
  env?: NodeJS.ProcessEnv;
  envFor?: Partial<Record<ServiceName, NodeJS.ProcessEnv>>;
  /** Where the processes' output goes; collected in `logs` when absent. */
  output?: "inherit" | "collect";
  readyTimeoutMs?: number;
}

export interface Mesh {
  readonly gatewayUrl: string;
  readonly ports: Record<ServiceName, number>;
  /** Everything the processes wrote, when output is "collect". */
  readonly logs: string[];
  process(name: ServiceName): ChildProcess;
  /** Stops one process (SIGTERM, or the given signal) and waits for it to exit. */
  stopService(name: ServiceName, signal?: NodeJS.Signals): Promise<void>;
  /** Starts a stopped process again with the same settings. */
  restartService(name: ServiceName): Promise<void>;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string, failed: () => string | undefined): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const failure = failed();
    if (failure) throw new Error(failure);
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const ports = {
    identity: options.ports?.identity ?? (await freePort()),
    payments: options.ports?.payments ?? (await freePort()),
    orders: options.ports?.orders ?? (await freePort()),
    content: options.ports?.content ?? (await freePort()),
    gateway: options.ports?.gateway ?? (await freePort()),
  };
  const address = (name: ServiceName) => `127.0.0.1:${ports[name]}`;
  const baseEnv: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: options.dataDir,
    IDENTITY_PORT: String(ports.identity),
    PAYMENTS_PORT: String(ports.payments),
    ORDERS_PORT: String(ports.orders),
    CONTENT_PORT: String(ports.content),
    GATEWAY_PORT: String(ports.gateway),
    IDENTITY_ADDRESS: address("identity"),
    PAYMENTS_ADDRESS: address("payments"),
    ORDERS_ADDRESS: address("orders"),
    CONTENT_ADDRESS: address("content"),
    IDENTITY_DEMO_DATA: options.demoData ? "true" : "false",
    CONTENT_DEMO_DATA: options.demoData ? "true" : "false",
    // The demo's catalog belongs to acme: its admin (alice) may import into it.
    ...(options.demoData ? { CATALOG_OWNER_TENANT: "acme" } : {}),
    ...options.env,
  };
  // Orders' own credential at identity, made for this mesh and given only to the two that need it.
  const ordersSecret = randomBytes(32).toString("base64url");
  const credentialsFor: Partial<Record<ServiceName, NodeJS.ProcessEnv>> = {
    identity: { IDENTITY_SERVICE_CREDENTIALS: `orders:${ordersSecret}` },
    orders: { ORDERS_SERVICE_SECRET: ordersSecret },
  };
  const logs: string[] = [];
  const children = new Map<ServiceName, ChildProcess>();
  const exits = new Map<ServiceName, string>();
  const expectedExit = new Set<ServiceName>();

  const launch = (name: ServiceName) => {
    const child = spawn(process.execPath, ["--import", "tsx", SERVICES[name]], {
      cwd: ROOT,
      env: { ...baseEnv, ...credentialsFor[name], ...options.envFor?.[name] },
      stdio: options.output === "inherit" ? ["ignore", "inherit", "inherit"] : ["ignore", "pipe", "pipe"],
    });
    if (options.output !== "inherit") {
      child.stdout?.setEncoding("utf8").on("data", (d: string) => logs.push(d));
      child.stderr?.setEncoding("utf8").on("data", (d: string) => logs.push(d));
    }
    exits.delete(name);
    child.once("exit", (code, signal) => {
      if (!expectedExit.has(name)) exits.set(name, `${name} exited early (code ${code}, signal ${signal})\n${logs.join("").slice(-2_000)}`);
    });
    children.set(name, child);
  };

  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const failure = () => [...exits.values()][0];
  const gatewayUrl = `http://${address("gateway")}`;
  const gatewayReady = async () => (await fetch(`${gatewayUrl}/readyz`)).status === 200;

  const stopService = async (name: ServiceName, signal: NodeJS.Signals = "SIGTERM") => {
    const child = children.get(name);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    expectedExit.add(name);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(signal);
    const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(killer);
  };

  try {
    // identity first: the others fetch its token keys.
    launch("identity");
    launch("payments");
    launch("orders");
    launch("content");
    launch("gateway");
    await waitFor(gatewayReady, readyTimeoutMs, "the mesh to become ready", failure);
  } catch (err) {
    for (const name of children.keys()) await stopService(name, "SIGKILL");
    throw err;
  }

  return {
    gatewayUrl,
    ports,
    logs,
    process: (name) => children.get(name)!,
    stopService,
    async restartService(name) {
      await stopService(name);
      expectedExit.delete(name);
      launch(name);
      // Only this process's own early exit fails the wait: another one dying meanwhile (a test that
      // kills processes on purpose) is that one's restart's business.
      await waitFor(gatewayReady, readyTimeoutMs, `${name} to become ready again`, () => exits.get(name));
    },
    async stop() {
      // The edge first, so no new work arrives; then the services.
      await stopService("gateway");
      await Promise.all([stopService("content"), stopService("orders"), stopService("payments"), stopService("identity")]);
    },
  };
}

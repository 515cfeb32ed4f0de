// Starts the mesh as separate processes (identity, payments, orders, content, webhooks, gateway), waits until every part is
// healthy, and stops it cleanly. `npm start`, the end-to-end tests and the benchmark all use it.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc/client.js";
import { channelSecurityFromFiles, tlsFilesOf } from "@switchyard/platform/grpc/tls.js";
import { grpcTlsSettings } from "@switchyard/platform/config.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Each process's bundle (`npm run build`); every process runs plain node on it. */
export const SERVICES = {
  identity: "dist/identity.js",
  payments: "dist/payments.js",
  orders: "dist/orders.js",
  content: "dist/content.js",
  webhooks: "dist/webhooks.js",
  gateway: "dist/gateway.js",
} as const;
export type ServiceName = keyof typeof SERVICES;

/**
 * Gateway settings for a fixed concurrency limit far above any load a test or a capacity
 * measurement brings: no shedding (the adaptive limit is exercised where it is the subject).
 */
export const NO_SHEDDING = {
  GATEWAY_CONCURRENCY_INITIAL: "10000",
  GATEWAY_CONCURRENCY_MIN: "10000",
  GATEWAY_CONCURRENCY_MAX: "10000",
} as const;

export interface MeshOptions {
  /** Fixed ports (npm start); otherwise the system picks free ones. */
  ports?: Partial<Record<ServiceName, number>>;
  /** Processes per service (default 1); its peers then balance over them. gatewayUrl is the first gateway. */
  replicas?: Partial<Record<ServiceName, number>>;
  dataDir: string;
  /** Seed the demo data: embedded storage only (with DATABASE_URL in `env` the services refuse it, unless DEMO_DATA_FORCE=true). */
  demoData?: boolean;
  /** Extra environment for every process (DATABASE_URL, LOG_LEVEL, …) and per process. */
  env?: NodeJS.ProcessEnv;
  envFor?: Partial<Record<ServiceName, NodeJS.ProcessEnv>>;
  /** Extra environment for single replicas, by index (a gateway behind a trusted proxy beside one that is not). */
  envForReplica?: Partial<Record<ServiceName, NodeJS.ProcessEnv[]>>;
  /** Where the processes' output goes; collected in `logs` when absent. */
  output?: "inherit" | "collect";
  readyTimeoutMs?: number;
  /**
   * Each service's metrics endpoint (the gateway serves /metrics on its own port): true = on ports the
   * system picks, or fixed ones. Bound here and handed over (METRICS_LISTEN_FD) like the service ports.
   */
  metrics?: boolean | Partial<Record<Exclude<ServiceName, "gateway">, number>>;
  /**
   * The processes in a process group of their own (npm start). A terminal's Ctrl-C signals its whole
   * foreground group at once: identity would stop while the others still follow its revocations, and
   * each of them log that it lost the stream. In a group of their own only the launcher hears it, and
   * stops them in order (`stop()`). Its owner must call `stop()` on every signal it handles; should
   * the launcher exit without it, they are killed.
   */
  ownProcessGroup?: boolean;
  /** Aborted while the mesh starts: what was launched is stopped, and startMesh rejects. */
  signal?: AbortSignal;
}

/**
 * The environment variable that names, in each process, the file descriptor of its end of a pipe whose
 * other end only this launcher holds: when the launcher is gone — however it went, SIGKILL included —
 * the pipe ends, and the process stops as on SIGTERM (services/platform/src/launcher.ts). Set by this
 * launcher only, never in a deployment, where the processes outlive whatever started them.
 */
export const LAUNCHER_FD = "LAUNCHER_FD";

export interface Mesh {
  readonly gatewayUrl: string;
  /** Each process's port (the first replica's). */
  readonly ports: Record<ServiceName, number>;
  /** Every replica's port, by service. */
  readonly replicaPorts: Record<ServiceName, number[]>;
  /** Each replica's metrics port, by service (with `metrics`; the gateway's is its own port). */
  readonly metricsPorts: Record<ServiceName, number[]>;
  /** Everything the processes wrote, when output is "collect". */
  readonly logs: string[];
  /** What one process wrote, when output is "collect". */
  logsOf(name: ServiceName, replica?: number): string[];
  process(name: ServiceName, replica?: number): ChildProcess;
  /** Stops one process (SIGTERM, or the given signal) and waits for it to exit. */
  stopService(name: ServiceName, signal?: NodeJS.Signals, replica?: number): Promise<void>;
  /**
   * Starts a stopped process again with the same settings and port, and waits until it serves —
   * unless `untilServing` is false (a process started while what it needs is away).
   */
  restartService(name: ServiceName, replica?: number, options?: { untilServing?: boolean }): Promise<void>;
  /** The processes that exited without being asked to, with their exit code or signal. */
  unexpectedExits(): string[];
  stop(): Promise<void>;
}

/**
 * A listening socket for one process, bound here and handed to the process as a file descriptor
 * (LISTEN_FD): between choosing a port and serving on it no other process can take it. Our copy is
 * closed once the child has it, so a stopped process refuses connections as a dead server does.
 */
async function listeningSocket(host: string, port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(err.code === "EADDRINUSE" ? new Error(`port ${port} on ${host} is already in use`) : err),
    );
    server.listen({ host, port, exclusive: true }, () => resolve());
  });
  return server;
}

const fdOf = (server: Server): number => (server as unknown as { _handle: { fd: number } })._handle.fd;

async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  failed: () => string | undefined,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const failure = failed();
    if (failure) throw new Error(failure);
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * The gateway: its /readyz; a service: SERVING over grpc.health.v1 on that port — over mutual TLS
 * with the process's own certificate when its environment turns TLS on.
 */
async function serving(port: number, name: ServiceName, env: NodeJS.ProcessEnv): Promise<boolean> {
  if (name === "gateway") return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
  const files = tlsFilesOf({
    tlsCertFile: env.GRPC_TLS_CERT_FILE,
    tlsKeyFile: env.GRPC_TLS_KEY_FILE,
    tlsCaFile: env.GRPC_TLS_CA_FILE,
  });
  const channel = openChannel(
    `127.0.0.1:${port}`,
    [],
    {},
    files &&
      channelSecurityFromFiles(files, env.GRPC_TLS_TRUST_DOMAIN || grpcTlsSettings.tlsTrustDomain.fallback!, name),
  );
  try {
    const reply = await createServiceClient(Health, channel).check({ service: "" }, { timeoutMs: 1_000 });
    return reply.status === HealthCheckResponse_ServingStatus.SERVING;
  } finally {
    channel.close();
  }
}

/**
 * Every process: source maps for stack traces; embedded PGlite's WebAssembly on V8's baseline
 * compiler only (--liftoff-only). The optimising tier recompiles most of PostgreSQL while a service
 * starts and migrates: about 1 s of CPU and 50–100 MB of resident code per process (and on Node 24
 * a passing 600 MB of compiler memory), for no gain on a service's small queries; bulk SQL runs
 * ~1.5× slower. It concerns WebAssembly only, which nothing else here runs, and must be given at
 * start: Node 24 ignores it set later.
 *
 * And no allocation-site pretenuring (--no-allocation-site-pretenuring), as in production (deploy/):
 * once V8 saw a burst of a request's objects survive (start-up, a stall), it allocated them straight
 * into old space from then on, where each died and — until the next full GC — kept the young objects
 * it pointed to alive through every scavenge. Measured on the gateway at 800 req/s: 8–10 ms
 * scavenges promoting 3 MB each with it, 1–2 ms promoting ~0.1 MB without (issue 15).
 *
 * And no memory reducer (--no-memory-reducer), as in production: on Node 24 a service whose load
 * paused for a few seconds had V8 run its memory-reducing full GCs, and paid for them when the load
 * came back — payments spent 0.26 ms of CPU per payment read instead of 0.17, the gateway 0.30
 * instead of 0.26 (meshes loaded in turn, 2 s each; issue 46). Node 20 showed no difference. Idle
 * resident memory moved by at most 25 MiB (docs/operations.md#node-flags).
 */
export const NODE_FLAGS = [
  "--enable-source-maps",
  "--no-allocation-site-pretenuring",
  "--no-memory-reducer",
  "--liftoff-only",
];

const NAMES = Object.keys(SERVICES) as ServiceName[];

export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const envOf = (name: ServiceName) => ({ ...process.env, ...options.env, ...options.envFor?.[name] });
  const hostOf = (name: ServiceName) => envOf(name)[`${name.toUpperCase()}_HOST`] || "127.0.0.1";
  const replicaCount = (name: ServiceName) => Math.max(1, options.replicas?.[name] ?? 1);

  // Every socket is bound before any process starts, so every address is known up front.
  const sockets = new Map<string, Server>();
  const replicaPorts = {} as Record<ServiceName, number[]>;
  const metricsPorts = {} as Record<ServiceName, number[]>;
  const key = (name: ServiceName, replica: number) => `${name}#${replica}`;
  const metricsKey = (name: ServiceName, replica: number) => `${name}#${replica}#metrics`;
  const wantsMetrics = (name: ServiceName) =>
    name !== "gateway" && options.metrics !== undefined && options.metrics !== false;
  const fixedMetricsPort = (name: ServiceName) =>
    typeof options.metrics === "object" ? (options.metrics[name as Exclude<ServiceName, "gateway">] ?? 0) : 0;
  try {
    for (const name of NAMES) {
      replicaPorts[name] = [];
      metricsPorts[name] = [];
      for (let r = 0; r < replicaCount(name); r++) {
        const socket = await listeningSocket(hostOf(name), r === 0 ? (options.ports?.[name] ?? 0) : 0);
        sockets.set(key(name, r), socket);
        replicaPorts[name].push((socket.address() as AddressInfo).port);
        if (wantsMetrics(name)) {
          const metrics = await listeningSocket(hostOf(name), r === 0 ? fixedMetricsPort(name) : 0);
          sockets.set(metricsKey(name, r), metrics);
          metricsPorts[name].push((metrics.address() as AddressInfo).port);
        } else if (name === "gateway") {
          metricsPorts[name].push(replicaPorts[name][r]!);
        }
      }
    }
  } catch (err) {
    for (const socket of sockets.values()) socket.close();
    throw err;
  }
  const ports = Object.fromEntries(NAMES.map((n) => [n, replicaPorts[n][0]!])) as Record<ServiceName, number>;
  // One replica: host:port. Several: a static list the peers' channels balance over (round robin).
  const address = (name: ServiceName) =>
    replicaPorts[name].length === 1
      ? `127.0.0.1:${ports[name]}`
      : `ipv4:${replicaPorts[name].map((p) => `127.0.0.1:${p}`).join(",")}`;
  const baseEnv: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: options.dataDir,
    IDENTITY_ADDRESS: address("identity"),
    PAYMENTS_ADDRESS: address("payments"),
    ORDERS_ADDRESS: address("orders"),
    CONTENT_ADDRESS: address("content"),
    WEBHOOKS_ADDRESS: address("webhooks"),
    // Partners' endpoints on this machine (loopback, plain http): a local mesh's receivers are. deploy/
    // allows neither.
    WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8,::1/128",
    WEBHOOK_ALLOW_PLAIN_HTTP: "true",
    IDENTITY_DEMO_DATA: options.demoData ? "true" : "false",
    CONTENT_DEMO_DATA: options.demoData ? "true" : "false",
    // The demo's catalog belongs to acme: its admin (alice) may import into it.
    ...(options.demoData ? { CATALOG_OWNER_TENANT: "acme" } : {}),
    ...options.env,
  };
  // The own credentials of orders, the gateway and payments at identity, made for this mesh and given
  // only to identity and to the one each belongs to.
  const ordersSecret = randomBytes(32).toString("base64url");
  const gatewaySecret = randomBytes(32).toString("base64url");
  const paymentsSecret = randomBytes(32).toString("base64url");
  const credentialsFor: Partial<Record<ServiceName, NodeJS.ProcessEnv>> = {
    identity: {
      IDENTITY_SERVICE_CREDENTIALS: `orders:${ordersSecret},gateway:${gatewaySecret},payments:${paymentsSecret}`,
    },
    orders: { ORDERS_SERVICE_SECRET: ordersSecret },
    payments: { PAYMENTS_SERVICE_SECRET: paymentsSecret },
    gateway: { GATEWAY_SERVICE_SECRET: gatewaySecret },
    // On a database server the webhooks service seals its secrets under a key: one for this mesh's life
    // (embedded storage, which npm start keeps across starts, keeps them as they are).
    webhooks: {
      ...(baseEnv.DATABASE_URL ? { WEBHOOK_SECRET_ENCRYPTION_KEY: randomBytes(32).toString("base64") } : {}),
    },
  };
  const logs: string[] = [];
  const logsByProcess = new Map<string, string[]>();
  const children = new Map<string, ChildProcess>();
  const exits = new Map<string, string>();
  const expectedExit = new Set<string>();

  /** The environment one process runs with (the mesh's own settings, then the caller's). */
  const processEnv = (name: ServiceName, replica: number): NodeJS.ProcessEnv => ({
    ...baseEnv,
    ...credentialsFor[name],
    ...options.envFor?.[name],
    ...options.envForReplica?.[name]?.[replica],
  });
  const launch = async (name: ServiceName, replica: number) => {
    const k = key(name, replica);
    const port = replicaPorts[name][replica]!;
    // A restart binds the same port again: the process it belonged to has just exited.
    const socket = sockets.get(k) ?? (await listeningSocket(hostOf(name), port));
    sockets.delete(k);
    const mk = metricsKey(name, replica);
    const metricsSocket = wantsMetrics(name)
      ? (sockets.get(mk) ?? (await listeningSocket(hostOf(name), metricsPorts[name][replica]!)))
      : undefined;
    sockets.delete(mk);
    const portSetting = `${name.toUpperCase()}_PORT`;
    const metricsEnv = metricsSocket
      ? { [`${name.toUpperCase()}_METRICS_PORT`]: String(metricsPorts[name][replica]), METRICS_LISTEN_FD: "4" }
      : {};
    const fds = metricsSocket ? [fdOf(socket), fdOf(metricsSocket)] : [fdOf(socket)];
    // After the sockets: this launcher's end of the pipe is the one no other process holds.
    const launcherFd = 3 + fds.length;
    try {
      const child = spawn(process.execPath, [...NODE_FLAGS, SERVICES[name]], {
        cwd: ROOT,
        env: {
          ...processEnv(name, replica),
          [portSetting]: String(port),
          LISTEN_FD: "3",
          ...metricsEnv,
          [LAUNCHER_FD]: String(launcherFd),
        },
        stdio: [
          "ignore",
          ...(options.output === "inherit" ? (["inherit", "inherit"] as const) : (["pipe", "pipe"] as const)),
          ...fds,
          "pipe",
        ],
        detached: options.ownProcessGroup === true,
      });
      // Held open, never read or written, until the child has exited (it must not keep this process alive).
      const launcherEnd = child.stdio[launcherFd] as Socket;
      launcherEnd.unref();
      child.once("exit", () => launcherEnd.destroy());
      if (options.output !== "inherit") {
        const own = logsByProcess.get(k) ?? [];
        logsByProcess.set(k, own);
        const collect = (d: string) => {
          logs.push(d);
          own.push(d);
        };
        child.stdout?.setEncoding("utf8").on("data", collect);
        child.stderr?.setEncoding("utf8").on("data", collect);
      }
      exits.delete(k);
      child.once("exit", (code, signal) => {
        if (!expectedExit.has(k))
          exits.set(k, `${k} exited early (code ${code}, signal ${signal})\n${logs.join("").slice(-2_000)}`);
      });
      children.set(k, child);
    } finally {
      socket.close();
      metricsSocket?.close();
    }
  };

  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const failure = () => [...exits.values()][0];
  const gatewayUrl = `http://127.0.0.1:${ports.gateway}`;
  const gatewayReady = async () => (await fetch(`${gatewayUrl}/readyz`)).status === 200;

  const stopService = async (name: ServiceName, signal: NodeJS.Signals = "SIGTERM", replica = 0) => {
    const k = key(name, replica);
    const child = children.get(k);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    expectedExit.add(k);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(signal);
    const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(killer);
  };
  const instances = () => [...children.keys()].map((k) => k.split("#") as [ServiceName, string]);
  if (options.ownProcessGroup) {
    // Nothing else ends processes outside the launcher's group: they go when it goes.
    process.once("exit", () => {
      for (const child of children.values())
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
  }

  const aborted = () => (options.signal?.aborted ? "the start was cancelled" : undefined);
  const failedOrAborted = () => aborted() ?? failure();
  try {
    // All at once: each one's socket already accepts connections (queued until it serves).
    for (const name of NAMES)
      for (let r = 0; r < replicaCount(name); r++) {
        const cancelled = aborted();
        if (cancelled) throw new Error(cancelled);
        await launch(name, r);
      }
    await waitFor(gatewayReady, readyTimeoutMs, "the mesh to become ready", failedOrAborted);
    // The gateway is ready when it is; a service is ready when it answers its health check.
    await waitFor(
      async () =>
        (
          await Promise.all(
            instances().map(([n, r]) => serving(replicaPorts[n][Number(r)]!, n, processEnv(n, Number(r)))),
          )
        ).every(Boolean),
      readyTimeoutMs,
      "every service to serve",
      failedOrAborted,
    );
  } catch (err) {
    for (const [n, r] of instances()) await stopService(n, "SIGKILL", Number(r));
    for (const socket of sockets.values()) socket.close();
    throw err;
  }

  return {
    gatewayUrl,
    ports,
    replicaPorts,
    metricsPorts,
    logs,
    logsOf: (name, replica = 0) => logsByProcess.get(key(name, replica)) ?? [],
    process: (name, replica = 0) => children.get(key(name, replica))!,
    stopService,
    unexpectedExits: () => [...exits.values()].map((e) => e.split("\n")[0]!),
    async restartService(name, replica = 0, { untilServing = true } = {}) {
      const k = key(name, replica);
      await stopService(name, "SIGTERM", replica);
      expectedExit.delete(k);
      await launch(name, replica);
      if (!untilServing) return;
      // Only this process's own early exit fails the wait: another one dying meanwhile (a test that
      // kills processes on purpose) is that one's restart's business.
      await waitFor(
        () => serving(replicaPorts[name][replica]!, name, processEnv(name, replica)),
        readyTimeoutMs,
        `${k} to become ready again`,
        () => exits.get(k),
      );
      await waitFor(gatewayReady, readyTimeoutMs, `the gateway to be ready after ${k} restarted`, () => exits.get(k));
    },
    async stop() {
      // The edge first, so no new work arrives; then the services.
      await Promise.all(
        instances()
          .filter(([n]) => n === "gateway")
          .map(([n, r]) => stopService(n, "SIGTERM", Number(r))),
      );
      await Promise.all(
        instances()
          .filter(([n]) => n !== "gateway" && n !== "identity")
          .map(([n, r]) => stopService(n, "SIGTERM", Number(r))),
      );
      // Identity last: the others follow its revocations until they stop.
      await Promise.all(
        instances()
          .filter(([n]) => n === "identity")
          .map(([n, r]) => stopService(n, "SIGTERM", Number(r))),
      );
    },
  };
}

// The one server bootstrap: every service is served through here with the same gRPC server,
// health, reflection (when asked for), error reporting, limits on what a caller may do, and
// graceful shutdown. Health says two things: `liveness` — the process runs (SERVING from the
// moment it listens until it exits, also while it drains or waits for its database: restarting it
// would not help) — and readiness, the overall status "" and each service's own — it serves calls
// (NOT_SERVING while it starts, drains, or while its database has been unreachable for a while).
import { createServer as createNetServer } from "node:net";
import { Server, ServerCredentials, type ServerOptions } from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { endCall } from "./grpc/handler-context.js";
import { fail } from "./errors.js";
import { Health } from "@switchyard/gen/health/v1/health_pb.js";
import { adaptService } from "./grpc/service-adapter.js";
import { deferredService } from "./grpc/deferred-service.js";
import { serviceChain, type RpcObserver, type ServiceInterceptor } from "./grpc/interceptors/index.js";
import { HealthStatus, ServingStatus } from "./grpc/health.js";
import { reflectionImpls, ReflectionV1, ReflectionV1Alpha } from "./grpc/reflection.js";
import type { Logger } from "./logger.js";
import { EventLoopGuard } from "./load-shed.js";
import { reportEventLoopLag, reportOpenStreams } from "./metrics.js";
import { MAX_MESSAGE_BYTES } from "./message-limits.js";
import { onEveryConnection, policePings, type PingPolicy } from "./grpc/connection-policy.js";
import type { DeadlineLimits } from "./grpc/deadline-policy.js";
import type { PeerIdentity } from "./grpc/call-policy.js";
import { watchLauncher } from "./launcher.js";
import { installCallTables, warnIfCallTablesMissing } from "./grpc/call-tables.js";

// The server's HTTP/2 sessions too: without it each call's objects outlive the call (grpc/call-tables.ts).
installCallTables();

export interface ServiceRegistration {
  readonly service: DescService;
  readonly impl: object;
  /**
   * The service's own interceptors, between the server's (call scope, telemetry, deadline, admission)
   * and its handlers: authentication, the Idempotency-Key rules (grpc/interceptors/). Empty: none
   * (health, reflection, echo).
   */
  readonly interceptors: readonly ServiceInterceptor[];
}

/** Pairs a service descriptor with its Connect-shaped implementation (type-checked) and its own interceptors. */
export function registration<S extends DescService>(
  service: S,
  impl: ServiceImpl<S>,
  interceptors: readonly ServiceInterceptor[] = [],
): ServiceRegistration {
  return { service, impl, interceptors };
}

export interface GrpcServerOptions {
  name: string;
  host: string;
  port: number;
  services: ServiceRegistration[];
  /**
   * Services the process will serve once it is ready (`RunningServer.serve`): until then their calls
   * wait for them (answered UNAVAILABLE / STORE_UNAVAILABLE just before their deadline: the process is
   * waiting for its database), and readiness is NOT_SERVING. Absent: none, the server is ready as it listens.
   */
  pending?: readonly DescService[];
  logger: Logger;
  /** How long a graceful shutdown waits for in-flight calls before cutting them. */
  drainTimeoutMs?: number;
  /** Shed new calls while the event loop's p99 delay exceeds this (ms); 0 or absent: never. */
  shedEventLoopDelayMs?: number;
  /** Serve on this inherited listening socket (a file descriptor) instead of binding host:port. */
  listenFd?: number | undefined;
  /** Clients are asked to reconnect after this long, so DNS round robin finds new replicas. */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  /** Serve gRPC server reflection (every service and method, to anyone who asks); absent: not. */
  reflection?: boolean;
  /** How often a connection may ping while nothing is sent to it; absent: DEFAULT_PING_POLICY. */
  pingPolicy?: PingPolicy;
  /** Calls one connection may have open at once; absent: DEFAULT_MAX_CONCURRENT_STREAMS. */
  maxConcurrentStreams?: number;
  /** Default and ceiling of the deadline of calls that answer once; absent: DEFAULT_DEADLINE_LIMITS. */
  deadlineLimits?: DeadlineLimits;
  /** The server's transport credentials (mutual TLS: grpc/tls.ts); absent: plaintext. */
  credentials?: ServerCredentials;
  /** How the transport names a calling service (mutual TLS: its certificate); absent: only its own token does. */
  peerIdentity?: PeerIdentity;
  /**
   * Also serve grpc.health.v1, and nothing else, in plaintext on this port of `host`: the kubelet's
   * gRPC probes present no client certificate. Absent: health on the service port only.
   */
  healthPort?: number | undefined;
}

/** The settings' defaults (config.ts, grpcServerHardeningSettings), for servers made without them (tests). */
export const DEFAULT_PING_POLICY: PingPolicy = { minIntervalMs: 10_000, maxStrikes: 2 };
export const DEFAULT_MAX_CONCURRENT_STREAMS = 1_000;
export const DEFAULT_DEADLINE_LIMITS: DeadlineLimits = { defaultMs: 30_000, maxMs: 300_000 };

/** The health service name of the process's liveness (the kubelet's liveness and startup probes ask for it). */
export const LIVENESS = "liveness";

export interface RunningServer {
  readonly port: number;
  readonly health: HealthStatus;
  /** Serves the pending services (the options' `pending`) with these registrations; readiness follows. */
  serve(services: readonly ServiceRegistration[]): void;
  /** Whether the process's database is reachable enough to serve; readiness follows (default: yes). */
  setStoreReady(ready: boolean): void;
  /** Stops taking calls, lets in-flight calls finish (up to the drain timeout), then closes. */
  shutdown(): Promise<void>;
}

const SERVER_OPTIONS: ServerOptions = {
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  // An answer past what every channel accepts fails here, before it is sent, not after crossing the wire.
  "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  "grpc.keepalive_time_ms": 60_000,
  "grpc.keepalive_permit_without_calls": 1,
  // Channelz is on by default: a tracker object with eight closures per call (~1.7 KB of a payments
  // read's ~55 KB allocated) for an introspection service nothing here registers.
  "grpc.enable_channelz": 0,
};

/**
 * Answered calls are logged at debug level (which replica served what); client errors quietly;
 * INTERNAL and non-catalogued errors loudly, with their stack.
 */
function callObserver(logger: Logger): RpcObserver {
  const answered = logger.isLevelEnabled("debug")
    ? (method: DescMethod, ms: number, requestId: string) =>
        logger.debug(
          {
            rpc: `${method.parent.typeName}/${method.name}`,
            code: "OK",
            ms: Math.round(ms * 10) / 10,
            request_id: requestId,
          },
          "rpc answered",
        )
    : undefined;
  const failed = (err: unknown, method: DescMethod, requestId: string) => {
    const rpc = `${method.parent.typeName}/${method.name}`;
    if (err instanceof ConnectError && (err.code === Code.Canceled || err.code === Code.DeadlineExceeded)) {
      // Work stopped because the caller went away or its deadline passed: worth seeing in the log.
      logger.info(
        { rpc, code: Code[err.code], message: err.rawMessage, request_id: requestId },
        "rpc stopped: cancelled by the caller or past its deadline",
      );
    } else if (err instanceof ConnectError && err.code !== Code.Internal && err.code !== Code.Unknown) {
      logger.debug({ rpc, code: Code[err.code], message: err.rawMessage, request_id: requestId }, "rpc failed");
    } else {
      // Only message and stack: driver errors carry row data (a hash, an email) in other fields.
      const e =
        err instanceof Error ? { type: err.name, message: err.message, stack: err.stack } : { message: String(err) };
      logger.error({ rpc, err: e, request_id: requestId }, "rpc failed with an internal error");
    }
  };
  return answered ? { failed, answered } : { failed };
}

/**
 * Serves on an inherited socket: the launcher bound it (port 0, or the port it keeps for this
 * process) and handed it over, so between choosing a port and serving on it nobody else can take it.
 * grpc-js binds only addresses, so the connections are injected into it.
 */
async function serveOnInheritedSocket(
  server: Server,
  fd: number,
  credentials: ServerCredentials,
): Promise<{ port: number; close(): void }> {
  const injector = server.createConnectionInjector(credentials);
  const listener = createNetServer((socket) => injector.injectConnection(socket));
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen({ fd }, () => resolve());
  });
  const address = listener.address();
  return { port: typeof address === "object" && address ? address.port : 0, close: () => listener.close() };
}

/**
 * The plaintext health endpoint beside a mutual-TLS service port: the same health, on a server of its
 * own that serves nothing else, held to the same limits on connections and calls.
 */
async function serveHealthOnly(
  health: HealthStatus,
  options: GrpcServerOptions,
  pingPolicy: PingPolicy,
): Promise<Server> {
  const server = new Server({
    ...SERVER_OPTIONS,
    "grpc.max_concurrent_streams": options.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
  });
  onEveryConnection(server, (session) => policePings(session, pingPolicy));
  const adapted = adaptService(Health, health.impl() as never, {
    interceptors: serviceChain({ observer: { failed: () => {} } }, []),
    deadlineLimits: options.deadlineLimits ?? DEFAULT_DEADLINE_LIMITS,
  });
  server.addService(adapted.definition, adapted.implementation);
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${options.host}:${options.healthPort}`, ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
  return server;
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningServer> {
  const server = new Server({
    ...SERVER_OPTIONS,
    "grpc.max_concurrent_streams": options.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
    ...(options.maxConnectionAgeMs ? { "grpc.max_connection_age_ms": options.maxConnectionAgeMs } : {}),
    ...(options.maxConnectionAgeGraceMs !== undefined
      ? { "grpc.max_connection_age_grace_ms": options.maxConnectionAgeGraceMs }
      : {}),
  });
  const pingPolicy = options.pingPolicy ?? DEFAULT_PING_POLICY;
  onEveryConnection(server, (session) =>
    policePings(session, pingPolicy, () =>
      options.logger.warn(
        { peer: session.socket?.remoteAddress },
        "a client pinged too often: GOAWAY ENHANCE_YOUR_CALM (too_many_pings)",
      ),
    ),
  );
  const health = new HealthStatus();
  const observer = callObserver(options.logger);
  const pending = options.pending ?? [];
  const all: ServiceRegistration[] = [...options.services, registration(Health, health.impl())];
  // Reflection lists every method to whoever asks: a convenience for development (npm start), off by default.
  if (options.reflection) {
    const reflection = reflectionImpls([...options.services.map((s) => s.service), ...pending, Health]);
    all.push(registration(ReflectionV1, reflection.v1), registration(ReflectionV1Alpha, reflection.v1alpha));
  }
  const deadlineLimits = options.deadlineLimits ?? DEFAULT_DEADLINE_LIMITS;
  const guard = options.shedEventLoopDelayMs ? new EventLoopGuard(options.shedEventLoopDelayMs) : undefined;
  // Streams are long by design: a drain cannot wait for them, so shutting down ends them (UNAVAILABLE:
  // their clients reconnect, to another replica when there is one).
  const openStreams = new Set<HandlerContext>();
  if (guard) reportEventLoopLag(() => guard.lag);
  // Every streaming method served here counts, at 0 too: a method's series is there before its first stream.
  const streamingMethods = [...all.map((r) => r.service), ...pending].flatMap((service) =>
    service.methods
      .filter((m) => m.methodKind === "server_streaming" || m.methodKind === "bidi_streaming")
      .map((m) => ({ rpcService: service.typeName, rpcMethod: m.name })),
  );
  reportOpenStreams(() => {
    const counts = new Map(streamingMethods.map((m) => [`${m.rpcService}/${m.rpcMethod}`, { ...m, open: 0 }]));
    for (const context of openStreams) {
      const count = counts.get(`${context.service.typeName}/${context.method.name}`);
      if (count) count.open++;
    }
    return counts;
  });
  const business = new Set([...options.services.map((s) => s.service), ...pending]);
  const adapt = ({ service, impl, interceptors }: ServiceRegistration) => {
    // Health and reflection always answer: an overloaded service must still say how it is.
    const chain = serviceChain({ observer, admission: business.has(service) ? guard : undefined }, interceptors);
    return adaptService(service, impl as never, {
      interceptors: chain,
      peer: options.peerIdentity,
      openStreams,
      deadlineLimits,
    });
  };
  for (const r of all) {
    const adapted = adapt(r);
    server.addService(adapted.definition, adapted.implementation);
  }
  // A pending service's calls wait for it until it is served (deferred-service.ts): the process waits
  // for its database meanwhile.
  const waiting = new Map(
    pending.map((service) => {
      const deferred = deferredService(service, () =>
        fail(
          "STORE_UNAVAILABLE",
          `${options.name} is starting: it waits for its database; retry after the Retry-After delay`,
        ),
      );
      server.addService(deferred.definition, deferred.implementation);
      return [service, deferred] as const;
    }),
  );
  let stopListening = () => {};
  let port: number;
  const credentials = options.credentials ?? ServerCredentials.createInsecure();
  if (options.listenFd !== undefined) {
    const inherited = await serveOnInheritedSocket(server, options.listenFd, credentials);
    port = inherited.port;
    stopListening = inherited.close;
  } else {
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${options.host}:${options.port}`, credentials, (err, bound) =>
        err ? reject(err) : resolve(bound),
      ),
    );
  }
  const healthServer =
    options.healthPort === undefined ? undefined : await serveHealthOnly(health, options, pingPolicy);
  // Readiness: "" and each business service's name, all alike.
  const readinessNames = ["", ...[...business].map((s) => s.typeName)];
  let storeReady = true;
  let draining = false;
  const publishReadiness = () => {
    const status = waiting.size === 0 && storeReady && !draining ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    for (const name of readinessNames) if (health.get(name) !== status) health.set(name, status);
  };
  health.set(LIVENESS, ServingStatus.SERVING);
  publishReadiness();

  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    (stopping ??= new Promise<void>((resolve) => {
      draining = true;
      publishReadiness();
      stopListening();
      healthServer?.forceShutdown();
      for (const context of openStreams)
        endCall(context, new ConnectError("the server is shutting down; reconnect", Code.Unavailable));
      const timer = setTimeout(() => {
        options.logger.warn("drain timeout: cancelling calls still in flight");
        server.forceShutdown();
        guard?.stop();
        resolve();
      }, options.drainTimeoutMs ?? 10_000);
      server.tryShutdown(() => {
        clearTimeout(timer);
        guard?.stop();
        resolve();
      });
    }));
  const serve = (registrations: readonly ServiceRegistration[]) => {
    for (const r of registrations) {
      const deferred = waiting.get(r.service);
      if (!deferred) throw new Error(`${r.service.typeName} is not a pending service of ${options.name}`);
      waiting.delete(r.service);
      deferred.serve(adapt(r).implementation);
    }
    publishReadiness();
  };
  const setStoreReady = (ready: boolean) => {
    storeReady = ready;
    publishReadiness();
  };
  warnIfCallTablesMissing(options.logger);
  options.logger.info({ port }, `${options.name} listening`);
  return { port, health, serve, setStoreReady, shutdown };
}

/** What an entrypoint started: how to stop it, and the pipe of the launcher that started it, if one did. */
export interface Started {
  stop: () => Promise<void>;
  /** LAUNCHER_FD: when that pipe ends, the launcher is gone, and the process stops as on SIGTERM. */
  launcherFd?: number | undefined;
}

/**
 * Runs an entrypoint: starts it, and on SIGTERM or SIGINT — or the end of its launcher — stops it
 * gracefully once. A signal while it still starts (waiting for its database, say) ends the process at
 * once: it serves nothing yet that a drain could finish.
 */
export function runMain(name: string, start: () => Promise<Started>): void {
  let stop: (() => Promise<void>) | undefined;
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (!stop) {
      process.stderr.write(`${name}: ${signal} while starting: stopped\n`);
      process.exit(0);
    }
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`${name}: error while stopping on ${signal}: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  start().then(
    (started) => {
      stop = started.stop;
      if (started.launcherFd !== undefined)
        watchLauncher(started.launcherFd, () => onSignal("the end of its launcher"));
    },
    (err: unknown) => {
      process.stderr.write(`${name}: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}

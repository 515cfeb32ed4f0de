// The one way a service process is assembled: its gRPC server (listening at once, its liveness
// SERVING), its database (waited for while it cannot be reached, then migrated), long-lived
// channels to its peers, its services served — and the stop that closes them in the right order.
// Each service only says what it serves (`serves`, `build`).
import { join } from "node:path";
import type { Client as GrpcChannel } from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import { openChannel } from "./grpc/client.js";
import { openTransportSecurity, type TlsConfig, type TransportSecurity } from "./grpc/tls.js";
import { certificateIdentity } from "./grpc/call-policy.js";
import { grpcTlsSettings } from "./config.js";
import type { Logger } from "./logger.js";
import {
  DEFAULT_DEADLINE_LIMITS,
  DEFAULT_MAX_CONCURRENT_STREAMS,
  DEFAULT_PING_POLICY,
  startGrpcServer,
  type GrpcServerOptions,
  type RunningServer,
  type ServiceRegistration,
} from "./server.js";
import { openSqlDatabase, type Migration, type SchemaAtStart, type SqlDatabase } from "./store/index.js";
import { startMetricsServer, startProcessMetrics, type MetricsServer } from "./metrics.js";
import { waitForDatabase, watchDatabase } from "./database-readiness.js";

/** DATABASE_UNREADY_AFTER_MS's default, for runtimes made without it (tests). */
const DEFAULT_UNREADY_AFTER_MS = 10_000;
import { startTracing } from "./tracing.js";

/** The settings every service has (see serviceSettings). */
export interface CommonServiceConfig extends Partial<TlsConfig> {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  /** Migrate the schema at start, or only verify it was (DATABASE_MIGRATIONS; default apply). */
  databaseMigrations?: SchemaAtStart;
  /** Connections of its pool on a PostgreSQL server (DATABASE_POOL_MAX; default 10). */
  databasePoolMax?: number;
  /** How long database checks fail before readiness turns NOT_SERVING (DATABASE_UNREADY_AFTER_MS; default 10 s). */
  databaseUnreadyAfterMs?: number;
  databaseSchema: string;
  dataDir: string;
  drainTimeoutMs: number;
  shedEventLoopDelayMs: number;
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  listenFd: number | undefined;
  /** What callers are held to (config.ts, grpcServerHardeningSettings); absent: the settings' defaults. */
  reflection?: boolean;
  minPingIntervalMs?: number;
  maxPingStrikes?: number;
  maxConcurrentStreams?: number;
  defaultDeadlineMs?: number;
  maxDeadlineMs?: number;
  /** A plaintext port serving grpc.health.v1 alone (GRPC_HEALTH_PORT), for probes under mutual TLS. */
  healthPort?: number | undefined;
  /** Metrics endpoint: this port (0 = none) or an inherited socket. */
  metricsPort?: number;
  metricsListenFd?: number | undefined;
}

/** A service this one calls, by its name (its SPIFFE ID's last part, with mutual TLS). */
export interface Peer {
  address: string;
  serves: readonly DescService[];
}

export interface ServiceParts {
  services: ServiceRegistration[];
  /** Runs after the server has drained, before channels and database close. */
  stop?: () => void | Promise<void>;
}

export interface ServiceRuntime {
  server: RunningServer;
  stop(): Promise<void>;
}

/** The server's limits on its callers, as the settings say (each absent one: the server's default). */
function hardeningOf(
  config: CommonServiceConfig,
): Pick<GrpcServerOptions, "reflection" | "pingPolicy" | "maxConcurrentStreams" | "deadlineLimits"> {
  return {
    reflection: config.reflection ?? false,
    pingPolicy: {
      minIntervalMs: config.minPingIntervalMs ?? DEFAULT_PING_POLICY.minIntervalMs,
      maxStrikes: config.maxPingStrikes ?? DEFAULT_PING_POLICY.maxStrikes,
    },
    maxConcurrentStreams: config.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
    deadlineLimits: {
      defaultMs: config.defaultDeadlineMs ?? DEFAULT_DEADLINE_LIMITS.defaultMs,
      maxMs: config.maxDeadlineMs ?? DEFAULT_DEADLINE_LIMITS.maxMs,
    },
  };
}

export async function startServiceRuntime<P extends string>(options: {
  name: string;
  config: CommonServiceConfig;
  logger: Logger;
  migrations: readonly Migration[];
  /** The services `build` registers: until they are served, their calls are answered STORE_UNAVAILABLE. */
  serves: readonly DescService[];
  /** gRPC peers by name → their address and what is served there; each gets one long-lived channel. */
  peers?: Record<P, Peer>;
  build: (resources: { db: SqlDatabase; channels: Record<P, GrpcChannel> }) => Promise<ServiceParts> | ServiceParts;
}): Promise<ServiceRuntime> {
  const { config, name } = options;
  // Tracing first (when the OTEL_* variables ask for it), so the migrations' statements are traced too.
  const stopTracing = await startTracing(name);
  let metrics: MetricsServer | undefined;
  if (config.metricsListenFd !== undefined || (config.metricsPort ?? 0) > 0) {
    startProcessMetrics(name);
    metrics = await startMetricsServer({
      host: config.host,
      port: config.metricsPort ?? 0,
      listenFd: config.metricsListenFd,
    });
    options.logger.info({ port: metrics.port }, `${name} metrics at /metrics`);
  }
  const stopTelemetry = async () => {
    await metrics?.close();
    await stopTracing();
  };
  let tls: TransportSecurity | undefined;
  let server: RunningServer;
  try {
    // Mutual TLS when GRPC_TLS_* are set: the certificate must name this service, or it does not start.
    tls = openTransportSecurity(
      {
        ...config,
        tlsTrustDomain: config.tlsTrustDomain ?? grpcTlsSettings.tlsTrustDomain.fallback!,
        tlsReloadIntervalMs: config.tlsReloadIntervalMs ?? grpcTlsSettings.tlsReloadIntervalMs.fallback!,
      },
      name,
      options.logger,
    );
    // Listening first: probes find the process alive while it waits for its database below.
    server = await startGrpcServer({
      name,
      host: config.host,
      port: config.port,
      logger: options.logger,
      drainTimeoutMs: config.drainTimeoutMs,
      shedEventLoopDelayMs: config.shedEventLoopDelayMs,
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      maxConnectionAgeGraceMs: config.maxConnectionAgeGraceMs,
      listenFd: config.listenFd,
      services: [],
      pending: options.serves,
      ...hardeningOf(config),
      healthPort: config.healthPort,
      // With mutual TLS a calling service is known by its certificate (grpc/call-policy.ts).
      ...(tls ? { credentials: tls.serverCredentials, peerIdentity: certificateIdentity(tls.trustDomain) } : {}),
    });
  } catch (err) {
    await stopTelemetry();
    throw err;
  }
  let db: SqlDatabase;
  try {
    db = await waitForDatabase(
      () =>
        openSqlDatabase({
          databaseUrl: config.databaseUrl,
          dataDir: join(config.dataDir, name),
          schema: config.databaseSchema,
          migrations: options.migrations,
          schemaAtStart: config.databaseMigrations,
          maxConnections: config.databasePoolMax,
        }),
      options.logger,
    );
  } catch (err) {
    await server.shutdown();
    await stopTelemetry();
    throw err;
  }
  const channels = Object.fromEntries(
    Object.entries<Peer>(options.peers ?? {}).map(([peerName, peer]) => [
      peerName,
      openChannel(peer.address, peer.serves, {}, tls?.forPeer(peerName)),
    ]),
  ) as Record<P, GrpcChannel>;
  const closeChannels = () => Object.values<GrpcChannel>(channels).forEach((c) => c.close());
  let parts: ServiceParts | undefined;
  try {
    parts = await options.build({ db, channels });
    const built = parts.services.map((r) => r.service.typeName).sort();
    const declared = options.serves.map((s) => s.typeName).sort();
    if (built.join() !== declared.join())
      throw new Error(`${name} builds ${built.join(", ")} but declares it serves ${declared.join(", ")}`);
    server.serve(parts.services);
    const stopWatching = watchDatabase(db, {
      unreadyAfterMs: config.databaseUnreadyAfterMs ?? DEFAULT_UNREADY_AFTER_MS,
      onReadiness: (ready) => server.setStoreReady(ready),
      logger: options.logger,
    });
    const stopParts = parts.stop;
    return {
      server,
      async stop() {
        await server.shutdown();
        stopWatching();
        await stopParts?.();
        closeChannels();
        await db.close();
        await stopTelemetry();
      },
    };
  } catch (err) {
    await server.shutdown();
    await parts?.stop?.();
    closeChannels();
    await db.close();
    await stopTelemetry();
    throw err;
  }
}

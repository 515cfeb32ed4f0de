// The one way a service process is assembled: its database (migrated), long-lived channels to
// its peers, its gRPC server — and the stop that closes them in the right order. Each service
// only says what it serves (`build`).
import { join } from "node:path";
import type { Client as GrpcChannel } from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import { openChannel } from "./grpc/client.js";
import type { Logger } from "./logger.js";
import { startGrpcServer, type RunningServer, type ServiceRegistration } from "./server.js";
import { openSqlDatabase, type Migration, type SqlDatabase } from "./store/sql.js";

/** The settings every service has (see serviceSettings). */
export interface CommonServiceConfig {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  databaseSchema: string;
  dataDir: string;
  drainTimeoutMs: number;
  shedEventLoopDelayMs: number;
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  listenFd: number | undefined;
}

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

export async function startServiceRuntime<P extends string>(options: {
  name: string;
  config: CommonServiceConfig;
  logger: Logger;
  migrations: readonly Migration[];
  /** gRPC peers by name → their address and what is served there; each gets one long-lived channel. */
  peers?: Record<P, Peer>;
  build: (resources: { db: SqlDatabase; channels: Record<P, GrpcChannel> }) => Promise<ServiceParts> | ServiceParts;
}): Promise<ServiceRuntime> {
  const { config, name } = options;
  const db = await openSqlDatabase({ databaseUrl: config.databaseUrl, dataDir: join(config.dataDir, name), schema: config.databaseSchema, migrations: options.migrations });
  const channels = Object.fromEntries(Object.entries<Peer>(options.peers ?? ({} as Record<P, Peer>)).map(([name, peer]) => [name, openChannel(peer.address, peer.serves)])) as Record<P, GrpcChannel>;
  const closeChannels = () => Object.values<GrpcChannel>(channels).forEach((c) => c.close());
  let parts: ServiceParts | undefined;
  try {
    parts = await options.build({ db, channels });
    const server = await startGrpcServer({
      name,
      host: config.host,
      port: config.port,
      logger: options.logger,
      drainTimeoutMs: config.drainTimeoutMs,
      shedEventLoopDelayMs: config.shedEventLoopDelayMs,
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      maxConnectionAgeGraceMs: config.maxConnectionAgeGraceMs,
      listenFd: config.listenFd,
      services: parts.services,
    });
    const stopParts = parts.stop;
    return {
      server,
      async stop() {
        await server.shutdown();
        await stopParts?.();
        closeChannels();
        await db.close();
      },
    };
  } catch (err) {
    await parts?.stop?.();
    closeChannels();
    await db.close();
    throw err;
  }
}

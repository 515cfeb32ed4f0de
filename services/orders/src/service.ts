// Assembles the orders service; main.ts feeds it the environment, tests call it directly.
import { join } from "node:path";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { createServiceClient, idempotencyKeyTtlSetting, jwksFromIdentity, loadConfig, openChannel, openSqlDatabase, parse, registration, schedulePurgeOfIdempotencyKeys, serviceSettings, setting, startGrpcServer, TokenVerifier, type ConfigOf, type Logger, type RunningServer } from "@switchyard/platform";
import { orderHandlers } from "./connect.js";
import { OrderEvents } from "./events.js";
import { ordersMigrations } from "./store/migrations.js";
import { SqlOrdersStore } from "./store/sql-store.js";

export const ordersSettings = {
  ...serviceSettings("ORDERS", 50053),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  paymentsAddress: setting("PAYMENTS_ADDRESS", parse.address, "payments service (charges and refunds)", "127.0.0.1:50052"),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
};
export type OrdersConfig = ConfigOf<typeof ordersSettings>;

export function ordersConfigFrom(env: NodeJS.ProcessEnv): OrdersConfig {
  return loadConfig(ordersSettings, env);
}

export interface OrdersRuntime {
  server: RunningServer;
  events: OrderEvents;
  stop(): Promise<void>;
}

export async function startOrdersService(config: OrdersConfig, logger: Logger): Promise<OrdersRuntime> {
  const db = await openSqlDatabase({ databaseUrl: config.databaseUrl, dataDir: join(config.dataDir, "orders"), schema: config.databaseSchema, migrations: ordersMigrations });
  const identity = openChannel(config.identityAddress);
  const paymentsChannel = openChannel(config.paymentsAddress);
  const closeChannels = () => {
    identity.close();
    paymentsChannel.close();
  };
  try {
    const events = new OrderEvents();
    const server = await startGrpcServer({
      name: "orders",
      host: config.host,
      port: config.port,
      logger,
      drainTimeoutMs: config.drainTimeoutMs,
      shedEventLoopDelayMs: config.shedEventLoopDelayMs,
      services: [
        registration(
          OrderService,
          orderHandlers({ store: new SqlOrdersStore(db), verifier: new TokenVerifier(jwksFromIdentity(identity)), payments: createServiceClient(PaymentService, paymentsChannel), events }),
        ),
      ],
    });
    const stopPurge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
    return {
      server,
      events,
      async stop() {
        stopPurge();
        await server.shutdown();
        closeChannels();
        await db.close();
      },
    };
  } catch (err) {
    closeChannels();
    await db.close();
    throw err;
  }
}

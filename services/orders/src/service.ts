// Assembles the orders service; main.ts feeds it the environment, tests call it directly.
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { createServiceClient, idempotencyKeyTtlSetting, jwksFromIdentity, loadConfig, parse, registration, schedulePurgeOfIdempotencyKeys, serviceSettings, setting, startServiceRuntime, TokenVerifier, type ConfigOf, type Logger, type ServiceRuntime } from "@switchyard/platform";
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

export interface OrdersRuntime extends ServiceRuntime {
  events: OrderEvents;
}

export async function startOrdersService(config: OrdersConfig, logger: Logger): Promise<OrdersRuntime> {
  const events = new OrderEvents();
  const runtime = await startServiceRuntime({
    name: "orders",
    config,
    logger,
    migrations: ordersMigrations,
    peers: { identity: config.identityAddress, payments: config.paymentsAddress },
    build: ({ db, channels }) => ({
      services: [
        registration(
          OrderService,
          orderHandlers({ store: new SqlOrdersStore(db), verifier: new TokenVerifier(jwksFromIdentity(channels.identity)), payments: createServiceClient(PaymentService, channels.payments), events }),
        ),
      ],
      stop: schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger),
    }),
  });
  return { ...runtime, events };
}

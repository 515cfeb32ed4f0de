// Assembles the orders service; main.ts feeds it the environment, tests call it directly.
import { randomBytes } from "node:crypto";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { hostname } from "node:os";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { loadConfig, parse, serviceSettings, setting, type ConfigOf } from "@switchyard/platform/config.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { createServiceClient } from "@switchyard/platform/grpc";
import { idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys } from "@switchyard/platform/store";
import { Faults, faultsSetting } from "@switchyard/platform/faults.js";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { registration } from "@switchyard/platform/server.js";
import { serviceCredentialsFromIdentity } from "@switchyard/platform/service-credentials.js";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { webhookRelay, webhookRelaySettings } from "@switchyard/platform/webhook-relay.js";
import type { OutboxRelay } from "@switchyard/platform/outbox-relay.js";
import { orderResourceOf } from "./partner-events.js";
import { orderHandlers, ordersInterceptors } from "./rpc-handlers.js";
import { OrderEvents } from "./events.js";
import { ordersMigrations } from "./store/migrations.js";
import { SqlOrdersStore } from "./store/sql-store.js";
import { MoneySteps, ORDERS_FAULT_POINTS } from "./workflow/money-steps.js";
import { Reconciler } from "./workflow/reconciler.js";

/** The client id orders has at identity (IDENTITY_SERVICE_CREDENTIALS names it). */
export const ORDERS_CLIENT_ID = "orders";

export const ordersSettings = {
  ...serviceSettings("ORDERS", 50053),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  paymentsAddress: setting(
    "PAYMENTS_ADDRESS",
    parse.address,
    "payments service (charges and refunds)",
    "127.0.0.1:50052",
  ),
  contentAddress: setting("CONTENT_ADDRESS", parse.address, "content service (catalog prices)", "127.0.0.1:50054"),
  webhooksAddress: setting(
    "WEBHOOKS_ADDRESS",
    parse.address,
    "webhooks service (the outbox's events are relayed to it)",
    "127.0.0.1:50055",
  ),
  serviceSecret: setting(
    "ORDERS_SERVICE_SECRET",
    parse.secretMatching(/^[\x21-\x7e]{32,}$/, "a secret of at least 32 visible ASCII characters"),
    "the secret orders presents to identity for its own service token (listed in identity's IDENTITY_SERVICE_CREDENTIALS)",
  ),
  reconcileIntervalMs: setting(
    "ORDERS_RECONCILE_INTERVAL_MS",
    parse.int(100, 600_000),
    "how often unsettled money steps past their deadline are settled",
    5_000,
  ),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
  ...webhookRelaySettings,
  faults: faultsSetting(ORDERS_FAULT_POINTS),
};
export type OrdersConfig = ConfigOf<typeof ordersSettings>;

export function ordersConfigFrom(env: NodeJS.ProcessEnv): OrdersConfig {
  return loadConfig(ordersSettings, env);
}

export interface OrdersRuntime extends ServiceRuntime {
  events: OrderEvents;
  reconciler: Reconciler;
}

export async function startOrdersService(config: OrdersConfig, logger: Logger): Promise<OrdersRuntime> {
  let reconciler: Reconciler | undefined;
  let relay: OutboxRelay | undefined;
  let events: OrderEvents | undefined;
  const runtime = await startServiceRuntime({
    name: "orders",
    config,
    logger,
    migrations: ordersMigrations,
    serves: [OrderService],
    peers: {
      identity: { address: config.identityAddress, serves: [IdentityService] },
      payments: { address: config.paymentsAddress, serves: [PaymentService] },
      content: { address: config.contentAddress, serves: [ContentService] },
      webhooks: { address: config.webhooksAddress, serves: [WebhookService] },
    },
    build: async ({ db, channels }) => {
      const store = new SqlOrdersStore(db);
      events = new OrderEvents(store);
      await events.start();
      const credentials = serviceCredentialsFromIdentity(channels.identity, ORDERS_CLIENT_ID, config.serviceSecret);
      // Its events, at least once, to the webhooks service.
      relay = webhookRelay(db, { channel: channels.webhooks, credentials }, orderResourceOf, {
        logger,
        pollMs: config.outboxPollMs,
        leaseMs: config.outboxLeaseMs,
      });
      const steps = new MoneySteps({
        store,
        payments: createServiceClient(PaymentService, channels.payments),
        credentials,
        logger,
        faults: new Faults(config.faults, logger),
        // A step's key is computed once, when its intent is recorded, and kept with the step: no replica
        // and no restart needs to compute it again, so each process can have a secret of its own.
        stepKeySecret: randomBytes(32),
      });
      reconciler = new Reconciler({
        store,
        steps,
        logger,
        intervalMs: config.reconcileIntervalMs,
        holder: `${hostname()}:${config.port}`,
      });
      const purge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
      const trust = await verifierFromIdentity(channels.identity, logger);
      return {
        services: [
          registration(
            OrderService,
            orderHandlers({ store, content: createServiceClient(ContentService, channels.content), steps, events }),
            ordersInterceptors(trust.verifier),
          ),
        ],
        stop: async () => {
          purge();
          trust.follower.stop();
          await reconciler?.stop();
          await relay?.stop();
          await events?.stop();
        },
      };
    },
  });
  reconciler!.start();
  relay!.start();
  return { ...runtime, events: events!, reconciler: reconciler! };
}

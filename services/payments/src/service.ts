// Assembles the payments service; main.ts feeds it the environment, tests call it directly.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import {
  loadConfig,
  optionalSetting,
  parse,
  serviceSettings,
  setting,
  type ConfigOf,
} from "@switchyard/platform/config.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys } from "@switchyard/platform/store";
import { Faults, faultsSetting } from "@switchyard/platform/faults.js";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { registration } from "@switchyard/platform/server.js";
import { serviceCredentialsFromIdentity } from "@switchyard/platform/service-credentials.js";
import { webhookRelay, webhookRelaySettings } from "@switchyard/platform/webhook-relay.js";
import { paymentResourceOf } from "./partner-events.js";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { PAYMENTS_FAULT_POINTS, paymentHandlers, paymentsInterceptors } from "./rpc-handlers.js";
import { paymentsMigrations } from "./store/migrations.js";
import { SqlPaymentsStore } from "./store/sql-store.js";

export const paymentsSettings = {
  ...serviceSettings("PAYMENTS", 50052),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  webhooksAddress: setting(
    "WEBHOOKS_ADDRESS",
    parse.address,
    "webhooks service (the outbox's events are relayed to it)",
    "127.0.0.1:50055",
  ),
  serviceSecret: optionalSetting(
    "PAYMENTS_SERVICE_SECRET",
    parse.secretMatching(/^[\x21-\x7e]{32,}$/, "a secret of at least 32 visible ASCII characters"),
    "the secret payments presents to identity for its own service token (listed in identity's IDENTITY_SERVICE_CREDENTIALS), with which it relays its events to the webhooks service; unset: only its certificate (mutual TLS) vouches for it",
  ),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
  ...webhookRelaySettings,
  faults: faultsSetting(PAYMENTS_FAULT_POINTS),
};
export type PaymentsConfig = ConfigOf<typeof paymentsSettings>;
export type PaymentsRuntime = ServiceRuntime;

export function paymentsConfigFrom(env: NodeJS.ProcessEnv): PaymentsConfig {
  return loadConfig(paymentsSettings, env);
}

export function startPaymentsService(config: PaymentsConfig, logger: Logger): Promise<PaymentsRuntime> {
  return startServiceRuntime({
    name: "payments",
    config,
    logger,
    migrations: paymentsMigrations,
    serves: [PaymentService],
    peers: {
      identity: { address: config.identityAddress, serves: [IdentityService] },
      webhooks: { address: config.webhooksAddress, serves: [WebhookService] },
    },
    build: async ({ db, channels }) => {
      const trust = await verifierFromIdentity(channels.identity, logger);
      const purge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
      // Its events, at least once, to the webhooks service.
      const credentials =
        config.serviceSecret === undefined
          ? undefined
          : serviceCredentialsFromIdentity(channels.identity, "payments", config.serviceSecret);
      const relay = webhookRelay(db, { channel: channels.webhooks, credentials }, paymentResourceOf, {
        logger,
        pollMs: config.outboxPollMs,
        leaseMs: config.outboxLeaseMs,
      });
      relay.start();
      return {
        services: [
          registration(
            PaymentService,
            paymentHandlers({ store: new SqlPaymentsStore(db), faults: new Faults(config.faults, logger) }),
            paymentsInterceptors(trust.verifier),
          ),
        ],
        stop: async () => {
          purge();
          trust.follower.stop();
          await relay.stop();
        },
      };
    },
  });
}

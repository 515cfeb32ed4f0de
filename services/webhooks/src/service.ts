// Assembles the webhooks service; main.ts feeds it the environment, tests call it directly.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import {
  ConfigError,
  loadConfig,
  optionalSetting,
  parse,
  serviceSettings,
  setting,
  type ConfigOf,
} from "@switchyard/platform/config.js";
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { Logger } from "@switchyard/platform/logger.js";
import { idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys } from "@switchyard/platform/store";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { parseEncryptionKey } from "@switchyard/platform/sealing.js";
import { registration } from "@switchyard/platform/server.js";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { parseNetworks } from "./domain/destinations.js";
import { SecretBox } from "./endpoint-secrets.js";
import { webhookHandlers, webhooksInterceptors } from "./rpc-handlers.js";
import { webhooksMigrations } from "./store/migrations.js";
import { SqlWebhooksStore } from "./store/sql-store.js";
import { SqlDeliveriesStore } from "./store/delivery-sql-store.js";
import { attemptDelivery } from "./workflow/attempt.js";
import { DeliveryWorker } from "./workflow/delivery-worker.js";
import { resolveWithSystemDns, type ResolveName } from "./workflow/destination-check.js";

export const webhooksSettings = {
  ...serviceSettings("WEBHOOKS", 50055),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
  secretEncryptionKey: optionalSetting(
    "WEBHOOK_SECRET_ENCRYPTION_KEY",
    parseEncryptionKey,
    "32 bytes in base64 that seal the endpoints' signing secrets at rest (AES-256-GCM); required with DATABASE_URL",
  ),
  allowedNetworks: setting(
    "WEBHOOK_ALLOWED_NETWORKS",
    parseNetworks,
    "networks (CIDR, comma-separated) a webhook may be sent to although they are not public, e.g. 127.0.0.0/8,::1/128 for a local mesh; empty = public unicast addresses only",
    [],
  ),
  allowPlainHttp: setting(
    "WEBHOOK_ALLOW_PLAIN_HTTP",
    parse.bool,
    "let endpoints be http:// (a local mesh, the tests); false = https only",
    false,
  ),
};
export type WebhooksConfig = ConfigOf<typeof webhooksSettings>;
export type WebhooksRuntime = ServiceRuntime;

export function webhooksConfigFrom(env: NodeJS.ProcessEnv): WebhooksConfig {
  const config = loadConfig(webhooksSettings, env);
  // On a database server the secrets are never stored in the clear.
  if (config.databaseUrl && !config.secretEncryptionKey)
    throw new ConfigError([
      "WEBHOOK_SECRET_ENCRYPTION_KEY is required with DATABASE_URL (32 bytes in base64, e.g. openssl rand -base64 32)",
    ]);
  return config;
}

export function startWebhooksService(
  config: WebhooksConfig,
  logger: Logger,
  resolve: ResolveName = resolveWithSystemDns,
): Promise<WebhooksRuntime> {
  return startServiceRuntime({
    name: "webhooks",
    config,
    logger,
    migrations: webhooksMigrations,
    serves: [WebhookService],
    peers: { identity: { address: config.identityAddress, serves: [IdentityService] } },
    build: async ({ db, channels }) => {
      const trust = await verifierFromIdentity(channels.identity, logger);
      const purge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
      const store = new SqlWebhooksStore(db, new SecretBox(config.secretEncryptionKey));
      const destinations = { allowPlainHttp: config.allowPlainHttp, allowedNetworks: config.allowedNetworks };
      const deliveries = new SqlDeliveriesStore(db);
      // Every replica delivers: each delivery by lease, a minute (past an attempt's 10 s) per claim.
      const worker = new DeliveryWorker(
        {
          store: deliveries,
          secrets: (tenantId, endpointId) => store.signingSecrets(tenantId, endpointId),
          attempt: (delivery) => attemptDelivery(delivery, { destinations, resolve }),
          logger,
        },
        {
          holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
          pollMs: 1_000,
          concurrency: 32,
          perEndpoint: 4,
          leaseMs: 60_000,
        },
      );
      worker.start();
      return {
        services: [
          registration(
            WebhookService,
            webhookHandlers({ store, deliveries, onRecorded: () => worker.poke(), destinations, resolve }),
            webhooksInterceptors(trust.verifier),
          ),
        ],
        stop: async () => {
          purge();
          trust.follower.stop();
          await worker.stop();
        },
      };
    },
  });
}

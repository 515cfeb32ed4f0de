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
import { RETRY_SCHEDULE } from "./domain/retries.js";
import { SecretBox } from "./endpoint-secrets.js";
import { webhookHandlers, webhooksInterceptors } from "./rpc-handlers.js";
import { webhooksMigrations } from "./store/migrations.js";
import { SqlWebhooksStore } from "./store/sql-store.js";
import { SqlDeliveriesStore } from "./store/delivery-sql-store.js";
import { ATTEMPT_LIMITS, attemptDelivery } from "./workflow/attempt.js";
import { DeliveryWorker } from "./workflow/delivery-worker.js";
import { resolveWithSystemDns, type ResolveName } from "./workflow/destination-check.js";

const DAY_MS = 24 * 3_600_000;

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
  // The back-off, the give-up period, the lease and the poll: issue 45's values by default; the tests
  // compress them to watch an hour of retries, or a dead replica's lease running out, in seconds.
  retryFirstMs: setting(
    "WEBHOOK_RETRY_FIRST_MS",
    parse.int(1, DAY_MS),
    "the first retry's back-off step in ms; each later one doubles (each wait drawn between half and all of its step)",
    RETRY_SCHEDULE.firstRetryMs,
  ),
  retryLongestMs: setting(
    "WEBHOOK_RETRY_LONGEST_MS",
    parse.int(1, 7 * DAY_MS),
    "the longest back-off step in ms",
    RETRY_SCHEDULE.longestWaitMs,
  ),
  giveUpAfterMs: setting(
    "WEBHOOK_GIVE_UP_AFTER_MS",
    parse.int(1, 30 * DAY_MS),
    "ms after its first attempt a delivery is failed for good, and an endpoint that delivered nothing in them disabled",
    RETRY_SCHEDULE.giveUpAfterMs,
  ),
  attemptTimeoutMs: setting(
    "WEBHOOK_ATTEMPT_TIMEOUT_MS",
    parse.int(100, 60_000),
    "an attempt ends after this many ms whatever the receiver does",
    ATTEMPT_LIMITS.timeoutMs,
  ),
  leaseMs: setting(
    "WEBHOOK_LEASE_MS",
    parse.int(200, 3_600_000),
    "how long a replica holds a delivery it claimed (longer than an attempt's timeout): a killed replica's deliveries are claimed again after it",
    60_000,
  ),
  pollMs: setting(
    "WEBHOOK_POLL_MS",
    parse.int(10, 60_000),
    "how often each replica looks for due deliveries while none are found (a new event wakes it at once)",
    1_000,
  ),
};
export type WebhooksConfig = ConfigOf<typeof webhooksSettings>;
export type WebhooksRuntime = ServiceRuntime;

export function webhooksConfigFrom(env: NodeJS.ProcessEnv): WebhooksConfig {
  const config = loadConfig(webhooksSettings, env);
  const problems: string[] = [];
  // On a database server the secrets are never stored in the clear.
  if (config.databaseUrl && !config.secretEncryptionKey)
    problems.push(
      "WEBHOOK_SECRET_ENCRYPTION_KEY is required with DATABASE_URL (32 bytes in base64, e.g. openssl rand -base64 32)",
    );
  // A live holder must never lose its lease mid-attempt: that would send the delivery twice at once.
  if (config.leaseMs <= config.attemptTimeoutMs)
    problems.push(
      `WEBHOOK_LEASE_MS (${config.leaseMs}) must be longer than WEBHOOK_ATTEMPT_TIMEOUT_MS (${config.attemptTimeoutMs})`,
    );
  if (config.retryLongestMs < config.retryFirstMs)
    problems.push("WEBHOOK_RETRY_LONGEST_MS must be at least WEBHOOK_RETRY_FIRST_MS");
  if (problems.length > 0) throw new ConfigError(problems);
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
      const limits = { ...ATTEMPT_LIMITS, timeoutMs: config.attemptTimeoutMs };
      // Every replica delivers: each delivery by lease (by default a minute, past an attempt's 10 s).
      const worker = new DeliveryWorker(
        {
          store: deliveries,
          secrets: (tenantId, endpointId) => store.signingSecrets(tenantId, endpointId),
          attempt: (delivery) => attemptDelivery(delivery, { destinations, resolve, limits }),
          logger,
          retries: {
            firstRetryMs: config.retryFirstMs,
            longestWaitMs: config.retryLongestMs,
            giveUpAfterMs: config.giveUpAfterMs,
          },
        },
        {
          holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
          pollMs: config.pollMs,
          concurrency: 32,
          perEndpoint: 4,
          leaseMs: config.leaseMs,
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

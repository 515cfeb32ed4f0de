// Assembles the identity service from its parts; main.ts feeds it the environment, tests call it directly.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import {
  ConfigError,
  demoDataProblems,
  demoDataSettings,
  loadConfig,
  optionalSetting,
  parse,
  serviceSettings,
  setting,
  type ConfigOf,
} from "@switchyard/platform/config.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { TokenVerifier } from "@switchyard/platform/auth.js";
import { registration } from "@switchyard/platform/server.js";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { LoginThrottle } from "./login-throttle.js";
import { RevocationHub } from "./revocation-hub.js";
import { IdentityAuthenticator, identityInterceptors, operatorInterceptors } from "./authenticator.js";
import { identityHandlers, operatorHandlers } from "./rpc-handlers.js";
import { seedDemoData } from "./demo-data.js";
import { parseServiceClients } from "./service-clients.js";
import { SERVICE_TOKEN_TTL_SECONDS } from "./domain/tokens.js";
import { parseEncryptionKey } from "@switchyard/platform/sealing.js";
import { RotatingKeyRing } from "./signing-keys.js";
import { identityMigrations } from "./store/migrations.js";
import { SqlIdentityStore } from "./store/sql-store.js";

export const identitySettings = {
  ...serviceSettings("IDENTITY", 50051),
  tokenTtlSeconds: setting("TOKEN_TTL_SECONDS", parse.int(5, 86_400), "lifetime of access tokens", 900),
  keyRotationHours: setting(
    "SIGNING_KEY_ROTATION_HOURS",
    parse.int(1, 8_760),
    "how long a signing key signs before the next one (published 10 minutes ahead) takes over",
    24,
  ),
  keyEncryptionKey: optionalSetting(
    "SIGNING_KEY_ENCRYPTION_KEY",
    parseEncryptionKey,
    "32 bytes in base64 that seal the private signing keys at rest (AES-256-GCM); required with DATABASE_URL",
  ),
  ...demoDataSettings(
    "IDENTITY_DEMO_DATA",
    "seed the demo tenants and users (npm start sets it; refused with DATABASE_URL unless DEMO_DATA_FORCE)",
  ),
  serviceClients: setting(
    "IDENTITY_SERVICE_CREDENTIALS",
    parseServiceClients,
    "internal services that may get a service token: name:secret[,name:secret…] (orders needs one; an operator entry lets `npm run admin` create tenants)",
    new Map(),
  ),
  loginFailuresAllowed: setting(
    "LOGIN_FAILURES_ALLOWED",
    parse.int(1, 1_000),
    "failed logins an account may have in 15 minutes before its attempts are refused (an address: four times as many)",
    5,
  ),
  loginBlockSeconds: setting(
    "LOGIN_BLOCK_SECONDS",
    parse.int(1, 900),
    "how long the first refusal lasts; it doubles with every further failure, up to 15 minutes",
    30,
  ),
  redisUrl: optionalSetting(
    "REDIS_URL",
    parse.url("redis:", "rediss:"),
    "Redis for the failed-login counters shared by every identity replica; unset = per process",
  ),
  loginThrottlePrefix: setting(
    "LOGIN_THROTTLE_PREFIX",
    parse.string,
    "key prefix of the failed-login counters in Redis (replicas sharing them use the same one)",
    "switchyard:login",
  ),
};
export type IdentityConfig = ConfigOf<typeof identitySettings>;

export function identityConfigFrom(env: NodeJS.ProcessEnv): IdentityConfig {
  const config = loadConfig(identitySettings, env);
  const problems = demoDataProblems(config, identitySettings.demoData.env);
  // On a database server the private keys are never stored in the clear.
  if (config.databaseUrl && !config.keyEncryptionKey)
    problems.push(
      "SIGNING_KEY_ENCRYPTION_KEY is required with DATABASE_URL (32 bytes in base64, e.g. openssl rand -base64 32)",
    );
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** A new key is published this long before it signs: longer than verifiers take to look at the keys again. */
export const KEY_PUBLISH_LEAD_MS = 10 * 60_000;

export type IdentityRuntime = ServiceRuntime;

export function startIdentityService(config: IdentityConfig, logger: Logger): Promise<IdentityRuntime> {
  return startServiceRuntime({
    name: "identity",
    config,
    logger,
    migrations: identityMigrations,
    serves: [IdentityService, OperatorService],
    build: async ({ db }) => {
      const store = new SqlIdentityStore(db);
      if (config.demoData) await seedDemoData(store);
      const keys = await RotatingKeyRing.open(store, {
        rotationMs: config.keyRotationHours * 3_600_000,
        publishLeadMs: KEY_PUBLISH_LEAD_MS,
        // A retired key verifies until the longest-lived token it signed has expired.
        tokenTtlMs: Math.max(config.tokenTtlSeconds, SERVICE_TOKEN_TTL_SECONDS) * 1000,
        encryptionKey: config.keyEncryptionKey,
        logger,
      });
      const revocations = new RevocationHub(store, logger);
      await revocations.start();
      // Identity verifies the tokens it issued with its own published keys and revocations: no network hop.
      const authenticator = new IdentityAuthenticator(
        new TokenVerifier(async () => keys.publicKeys(), Date.now, revocations.list),
        store,
      );
      const throttle = new LoginThrottle({
        failuresAllowed: config.loginFailuresAllowed,
        firstBlockSeconds: config.loginBlockSeconds,
        redisUrl: config.redisUrl,
        keyPrefix: config.loginThrottlePrefix,
      });
      await throttle.ready();
      return {
        stop: async () => {
          keys.stop();
          await revocations.stop();
          await throttle.close();
        },
        services: [
          registration(
            IdentityService,
            identityHandlers({
              store,
              keys,
              tokenTtlSeconds: config.tokenTtlSeconds,
              serviceClients: config.serviceClients,
              throttle,
              revocations,
            }),
            identityInterceptors(authenticator),
          ),
          registration(OperatorService, operatorHandlers({ store, logger }), operatorInterceptors(authenticator)),
        ],
      };
    },
  });
}

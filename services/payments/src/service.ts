// Assembles the payments service; main.ts feeds it the environment, tests call it directly.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { loadConfig, parse, serviceSettings, setting, type ConfigOf } from "@switchyard/platform/config.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys } from "@switchyard/platform/store";
import { Faults, faultsSetting } from "@switchyard/platform/faults.js";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { registration } from "@switchyard/platform/server.js";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { PAYMENTS_FAULT_POINTS, paymentHandlers, paymentsInterceptors } from "./rpc-handlers.js";
import { paymentsMigrations } from "./store/migrations.js";
import { SqlPaymentsStore } from "./store/sql-store.js";

export const paymentsSettings = {
  ...serviceSettings("PAYMENTS", 50052),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
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
    peers: { identity: { address: config.identityAddress, serves: [IdentityService] } },
    build: async ({ db, channels }) => {
      const trust = await verifierFromIdentity(channels.identity, logger);
      const purge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
      return {
        services: [
          registration(
            PaymentService,
            paymentHandlers({ store: new SqlPaymentsStore(db), faults: new Faults(config.faults, logger) }),
            paymentsInterceptors(trust.verifier),
          ),
        ],
        stop: () => {
          purge();
          trust.follower.stop();
        },
      };
    },
  });
}

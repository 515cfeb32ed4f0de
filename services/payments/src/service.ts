// Assembles the payments service; main.ts feeds it the environment, tests call it directly.
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { Faults, faultsSetting, idempotencyKeyTtlSetting, jwksFromIdentity, loadConfig, parse, registration, schedulePurgeOfIdempotencyKeys, serviceSettings, setting, startServiceRuntime, TokenVerifier, type ConfigOf, type Logger, type ServiceRuntime } from "@switchyard/platform";
import { PAYMENTS_FAULT_POINTS, paymentHandlers, paymentsAuthentication } from "./connect.js";
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
    peers: { identity: config.identityAddress },
    build: ({ db, channels }) => ({
      services: [
        registration(
          PaymentService,
          paymentHandlers({ store: new SqlPaymentsStore(db), faults: new Faults(config.faults, logger) }),
          paymentsAuthentication(new TokenVerifier(jwksFromIdentity(channels.identity))),
        ),
      ],
      stop: schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger),
    }),
  });
}

// Assembles the payments service; main.ts feeds it the environment, tests call it directly.
import { join } from "node:path";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { jwksFromIdentity, loadConfig, openChannel, openSqlDatabase, parse, idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys, registration, serviceSettings, setting, startGrpcServer, TokenVerifier, type ConfigOf, type Logger, type RunningServer } from "@switchyard/platform";
import { paymentHandlers } from "./connect.js";
import { paymentsMigrations } from "./store/migrations.js";
import { SqlPaymentsStore } from "./store/sql-store.js";

export const paymentsSettings = {
  ...serviceSettings("PAYMENTS", 50052),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
};
export type PaymentsConfig = ConfigOf<typeof paymentsSettings>;

export function paymentsConfigFrom(env: NodeJS.ProcessEnv): PaymentsConfig {
  return loadConfig(paymentsSettings, env);
}

export interface PaymentsRuntime {
  server: RunningServer;
  stop(): Promise<void>;
}

export async function startPaymentsService(config: PaymentsConfig, logger: Logger): Promise<PaymentsRuntime> {
  const db = await openSqlDatabase({ databaseUrl: config.databaseUrl, dataDir: join(config.dataDir, "payments"), schema: config.databaseSchema, migrations: paymentsMigrations });
  const identity = openChannel(config.identityAddress);
  try {
    const verifier = new TokenVerifier(jwksFromIdentity(identity));
    const server = await startGrpcServer({
      name: "payments",
      host: config.host,
      port: config.port,
      logger,
      drainTimeoutMs: config.drainTimeoutMs,
      shedEventLoopDelayMs: config.shedEventLoopDelayMs,
      services: [registration(PaymentService, paymentHandlers({ store: new SqlPaymentsStore(db), verifier }))],
    });
    const stopPurge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
    return {
      server,
      async stop() {
        stopPurge();
        await server.shutdown();
        identity.close();
        await db.close();
      },
    };
  } catch (err) {
    identity.close();
    await db.close();
    throw err;
  }
}

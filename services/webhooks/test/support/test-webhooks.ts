// One webhooks service in the test process, beside an identity of its own (demo users), on real gRPC
// sockets and a real engine (PGlite in a temp dir, or the server in `databaseUrl` under fresh schemas).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { startTestIdentity, type TestIdentity } from "../../../identity/test/support/test-identity.js";
import { startWebhooksService, webhooksConfigFrom } from "../../src/service.js";
import type { ResolveName } from "../../src/workflow/destination-check.js";

export interface TestWebhooks {
  identity: TestIdentity;
  webhooks: Client<typeof WebhookService>;
  stop(): Promise<void>;
}

export async function startTestWebhooks(options: {
  databaseUrl: string | undefined;
  /** More settings (WEBHOOK_ALLOWED_NETWORKS, …). */
  env?: NodeJS.ProcessEnv;
  resolve?: ResolveName;
}): Promise<TestWebhooks> {
  const schema = `webhooks_${randomBytes(4).toString("hex")}`;
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-webhooks-"));
  const identity = await startTestIdentity({ databaseUrl: options.databaseUrl, demoData: true });
  const runtime = await startWebhooksService(
    webhooksConfigFrom({
      DATA_DIR: dataDir,
      LOG_LEVEL: "silent",
      DATABASE_URL: options.databaseUrl ?? "",
      // The test shares this event loop: no shedding on it (tested on its own).
      SHED_EVENT_LOOP_DELAY_MS: "0",
      WEBHOOKS_PORT: "0",
      IDENTITY_ADDRESS: identity.address,
      WEBHOOKS_DB_SCHEMA: schema,
      WEBHOOK_SECRET_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      ...options.env,
    }),
    createLogger("test", "silent"),
    ...(options.resolve ? [options.resolve] : []),
  );
  const channel = openChannel(`127.0.0.1:${runtime.server.port}`);
  return {
    identity,
    webhooks: createServiceClient(WebhookService, channel),
    async stop() {
      channel.close();
      await runtime.stop();
      await identity.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (options.databaseUrl) {
        const client = new pg.Client(options.databaseUrl);
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    },
  };
}

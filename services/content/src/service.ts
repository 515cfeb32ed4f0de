// Assembles the content service; main.ts feeds it the environment, tests call it directly.
import { join } from "node:path";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { jwksFromIdentity, loadConfig, openChannel, openSqlDatabase, parse, registration, serviceSettings, setting, startGrpcServer, TokenVerifier, type ConfigOf, type Logger, type RunningServer } from "@switchyard/platform";
import { contentHandlers } from "./connect.js";
import { seedDemoCatalog } from "./demo-data.js";
import { PostFeed } from "./feed.js";
import { contentMigrations } from "./store/migrations.js";
import { SqlContentStore } from "./store/sql-store.js";

export const contentSettings = {
  ...serviceSettings("CONTENT", 50054),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  demoData: setting("CONTENT_DEMO_DATA", parse.bool, "seed the demo catalog (npm start sets it)", false),
};
export type ContentConfig = ConfigOf<typeof contentSettings>;

export function contentConfigFrom(env: NodeJS.ProcessEnv): ContentConfig {
  return loadConfig(contentSettings, env);
}

export interface ContentRuntime {
  server: RunningServer;
  feed: PostFeed;
  stop(): Promise<void>;
}

export async function startContentService(config: ContentConfig, logger: Logger): Promise<ContentRuntime> {
  const db = await openSqlDatabase({ databaseUrl: config.databaseUrl, dataDir: join(config.dataDir, "content"), schema: config.databaseSchema, migrations: contentMigrations });
  const identity = openChannel(config.identityAddress);
  try {
    const store = new SqlContentStore(db);
    if (config.demoData) await seedDemoCatalog(store);
    const feed = new PostFeed(store, logger);
    await feed.start();
    const server = await startGrpcServer({
      name: "content",
      host: config.host,
      port: config.port,
      logger,
      drainTimeoutMs: config.drainTimeoutMs,
      shedEventLoopDelayMs: config.shedEventLoopDelayMs,
      services: [registration(ContentService, contentHandlers({ store, verifier: new TokenVerifier(jwksFromIdentity(identity)), feed }))],
    });
    return {
      server,
      feed,
      async stop() {
        await server.shutdown();
        await feed.stop();
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

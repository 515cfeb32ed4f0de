// Assembles the content service; main.ts feeds it the environment, tests call it directly.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
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
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { registration } from "@switchyard/platform/server.js";
import { idempotencyKeyTtlSetting, schedulePurgeOfIdempotencyKeys } from "@switchyard/platform/store";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { contentHandlers, contentInterceptors } from "./rpc-handlers.js";
import { seedDemoCatalog } from "./demo-data.js";
import { PostFeed } from "./feed.js";
import { ImportJobRunner, type ImportJobRunnerOptions } from "./import-jobs.js";
import { CacheChangeLog, type CacheChangeLogOptions } from "./cache-changes.js";
import { CacheLeases } from "./cache-leases.js";
import { contentMigrations } from "./store/migrations.js";
import { sqlContentStores } from "./store/sql-store.js";

export const contentSettings = {
  ...serviceSettings("CONTENT", 50054),
  identityAddress: setting("IDENTITY_ADDRESS", parse.address, "identity service (token keys)", "127.0.0.1:50051"),
  ...demoDataSettings(
    "CONTENT_DEMO_DATA",
    "seed the demo catalog (npm start sets it; refused with DATABASE_URL unless DEMO_DATA_FORCE)",
  ),
  replayLimit: setting(
    "CONTENT_REPLAY_LIMIT",
    parse.int(1, 100_000),
    "the most posts a live feed resuming from a position (Last-Event-ID) replays; an older position is refused (409 REPLAY_TOO_LONG)",
    1_000,
  ),
  idempotencyKeyTtlHours: idempotencyKeyTtlSetting,
  cacheLeaseMs: setting(
    "CONTENT_CACHE_LEASE_MS",
    parse.int(300, 60_000),
    "how long an edge cache's lease holds without renewal: the longest a write of cached data (a document, the catalog) waits for a cache that stopped acknowledging",
    2_000,
  ),
  catalogOwnerTenant: optionalSetting(
    "CATALOG_OWNER_TENANT",
    parse.matching(/^[a-z0-9][a-z0-9-]{0,62}$/, "a tenant id"),
    "the tenant whose admins may write the global catalog (ImportItems); unset: nobody",
  ),
};
export type ContentConfig = ConfigOf<typeof contentSettings>;

export function contentConfigFrom(env: NodeJS.ProcessEnv): ContentConfig {
  const config = loadConfig(contentSettings, env);
  const problems = demoDataProblems(config, contentSettings.demoData.env);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

export interface ContentRuntime extends ServiceRuntime {
  feed: PostFeed;
  cacheLog: CacheChangeLog;
}

/** Tests only: how the import job runner is tuned (its lease, poll interval, chunk size). */
export interface ContentTestOptions {
  importJobs?: Omit<ImportJobRunnerOptions, "soleRunner" | "cachesApplied">;
  cacheLog?: CacheChangeLogOptions;
}

export async function startContentService(
  config: ContentConfig,
  logger: Logger,
  testOptions: ContentTestOptions = {},
): Promise<ContentRuntime> {
  let feed: PostFeed | undefined;
  let cacheLog: CacheChangeLog | undefined;
  const runtime = await startServiceRuntime({
    name: "content",
    config,
    logger,
    migrations: contentMigrations,
    serves: [ContentService],
    peers: { identity: { address: config.identityAddress, serves: [IdentityService] } },
    build: async ({ db, channels }) => {
      const stores = sqlContentStores(db);
      if (config.demoData) await seedDemoCatalog(stores.catalog);
      const live = new PostFeed(stores.posts, logger);
      feed = live;
      await live.start();
      // The edge caches' change stream (read by this replica, for the caches connected here) and leases.
      const changes = new CacheChangeLog(stores.cacheLog, logger, testOptions.cacheLog);
      cacheLog = changes;
      await changes.start();
      const leases = new CacheLeases(stores.cacheLog, config.cacheLeaseMs);
      await leases.start();
      const trust = await verifierFromIdentity(channels.identity, logger);
      // Import jobs run here, in the background; on embedded storage this process is their only runner.
      const imports = new ImportJobRunner(stores.importJobs, logger, {
        ...testOptions.importJobs,
        soleRunner: db.engine === "pglite",
        cachesApplied: () => leases.applied(),
      });
      imports.start();
      const purge = schedulePurgeOfIdempotencyKeys(db, config.idempotencyKeyTtlHours, logger);
      return {
        services: [
          registration(
            ContentService,
            contentHandlers({
              stores,
              feed: live,
              catalogOwnerTenant: config.catalogOwnerTenant,
              replayLimit: config.replayLimit,
              importJobQueued: () => imports.wake(),
              cacheLog: changes,
              cacheLeases: leases,
            }),
            contentInterceptors(trust.verifier),
          ),
        ],
        stop: async () => {
          purge();
          await imports.stop();
          trust.follower.stop();
          await live.stop();
          await changes.stop();
          await leases.stop();
        },
      };
    },
  });
  return { ...runtime, feed: feed!, cacheLog: cacheLog! };
}

// ContentService RPC handlers: proto in, proto out.
import type { ServiceImpl } from "@connectrpc/connect";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  ContentService,
  ImportItemsRequestSchema,
  type Post,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { fail } from "@switchyard/platform/errors.js";
import { ANYONE, authentication, callerOf, callScopeOf, idempotencyKeys, USERS } from "@switchyard/platform/grpc";
import type { Authenticator, CallPolicy, ServiceInterceptor } from "@switchyard/platform/grpc";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { isIdOf } from "@switchyard/platform/ids.js";
import { decodeCursor, keysetAfter, pageOf, pageSizeOf } from "@switchyard/platform/paging.js";
import { GATEWAY_SERVICE, principalOf, requireRole } from "@switchyard/platform/caller.js";
import { batchSkus, catalogPage, checkIfMatch, requireCatalogOwner, validateText } from "./domain/content.js";
import { cacheLeaseRenewal } from "./domain/cache-leases.js";
import type { CacheChangeLog } from "./cache-changes.js";
import type { CacheLeases } from "./cache-leases.js";
import { importLines, linesFingerprint } from "./domain/imports.js";
import { importCatalogItems } from "./catalog-import.js";
import type { PostFeed } from "./feed.js";
import {
  cacheChangeToProto,
  catalogItemToProto,
  documentToProto,
  importJobToProto,
  postBytes,
  postKeyset,
  postsCollection,
  postToProto,
} from "./proto-mapping.js";
import type { CacheChangeRecord } from "./store/cache-log/port.js";
import type { PostRecord } from "./store/posts/port.js";
import type { ContentStores } from "./store/port.js";

export interface ContentDeps {
  stores: ContentStores;
  /** The most posts a watch resuming from a position replays; an older position is refused. */
  replayLimit: number;
  feed: PostFeed;
  /** The tenant whose admins may write the global catalog; undefined: nobody. */
  catalogOwnerTenant: string | undefined;
  /** Told when a job is queued, so that it starts now rather than at the next poll. */
  importJobQueued?: () => void;
  /** This replica's reader of the cache change log (WatchCacheChanges). */
  cacheLog: CacheChangeLog;
  /** The edge caches' leases: a write of cached data answers once they applied it. */
  cacheLeases: CacheLeases;
}

/**
 * Who may call content: the public catalog anyone (orders reads prices there); documents, posts and
 * writing the catalog a user (the catalog's owner tenant's admins: domain rules below); the edge
 * caches' change stream and leases the gateway alone (the stream names tenants' documents).
 */
export const contentCallPolicy: CallPolicy<typeof ContentService> = {
  listCatalogItems: ANYONE,
  batchGetCatalogItems: ANYONE,
  createDocument: USERS,
  getDocument: USERS,
  updateDocument: USERS,
  createPost: USERS,
  getPost: USERS,
  listPosts: USERS,
  watchPosts: USERS,
  importItems: USERS,
  createImportJob: USERS,
  getImportJob: USERS,
  watchCacheChanges: { services: [GATEWAY_SERVICE] },
  renewCacheLease: { services: [GATEWAY_SERVICE] },
};

/**
 * What every call to content goes through before its handler, besides the server's own steps: its
 * caller, as the call policy says; then the key of a new import job.
 */
export const contentInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof ContentService>({ authenticator, access: contentCallPolicy }),
  idempotencyKeys<typeof ContentService>({ createImportJob: "required" }),
];

const REPLAY_PAGE = 200;
/** A cache that falls this many changes behind its stream is ended (it resynchronises) rather than buffered for. */
export const MAX_CACHE_BACKLOG = 100_000;
/** A watcher that falls this far behind (the posts' encoded size) is ended rather than buffered without bound. */
export const MAX_WATCH_BACKLOG_BYTES = 1024 * 1024;
export { MAX_IMPORT_ITEMS } from "./catalog-import.js";

export function contentHandlers({
  stores: { documents, posts, catalog, importJobs },
  feed,
  catalogOwnerTenant,
  replayLimit,
  importJobQueued,
  cacheLog,
  cacheLeases,
}: ContentDeps): ServiceImpl<typeof ContentService> {
  return {
    async createDocument(req, ctx) {
      const caller = callerOf(ctx);
      return { document: documentToProto(await documents.createDocument(caller.tenantId, validateText(req))) };
    },

    async getDocument(req, ctx) {
      const caller = callerOf(ctx);
      const doc = isIdOf("doc", req.documentId)
        ? await documents.getDocument(caller.tenantId, req.documentId)
        : undefined;
      if (!doc) throw fail("NOT_FOUND", "document not found");
      return { document: documentToProto(doc) };
    },

    async updateDocument(req, ctx) {
      const caller = callerOf(ctx);
      const text = validateText(req);
      const current = isIdOf("doc", req.documentId)
        ? await documents.getDocument(caller.tenantId, req.documentId)
        : undefined;
      if (!current) throw fail("NOT_FOUND", "document not found");
      let expected: number | undefined;
      if (req.ifMatch !== "") {
        checkIfMatch(req.ifMatch, current);
        expected = current.version;
      }
      const updated = await documents.updateDocument(caller.tenantId, current.id, text, {
        expectedVersion: expected,
        call: callScopeOf(ctx),
      });
      // The version moved between our read and our write: another save won.
      if (!updated) throw fail("ETAG_MISMATCH", "the document changed while saving: fetch it again and reconcile");
      // No edge cache serves the old version once this answers.
      await cacheLeases.applied();
      return { document: documentToProto(updated) };
    },

    async createPost(req, ctx) {
      const caller = callerOf(ctx);
      const post = await posts.createPost(caller.tenantId, caller.userId, validateText(req), callScopeOf(ctx));
      return { post: postToProto(post) };
    },

    async getPost(req, ctx) {
      const caller = callerOf(ctx);
      const post = isIdOf("post", req.postId) ? await posts.getPost(caller.tenantId, req.postId) : undefined;
      if (!post) throw fail("NOT_FOUND", "post not found");
      return { post: postToProto(post) };
    },

    async listPosts(req, ctx) {
      const caller = callerOf(ctx);
      const size = pageSizeOf(req.pageSize);
      const collection = postsCollection(caller.tenantId);
      const rows = await posts.listPosts(caller.tenantId, decodeCursor(collection, req.pageToken), size + 1);
      // Posts are up to ~180 KB each: a page of them ends at MAX_PAGE_BYTES, with a cursor to the rest.
      const page = pageOf(rows, size, { collection, keyOf: postKeyset, bytes: { bytesOf: postBytes } });
      return { posts: page.items.map(postToProto), nextPageToken: page.nextCursor };
    },

    async *watchPosts(req, ctx) {
      const caller = callerOf(ctx);
      let last = decodeCursor(postsCollection(caller.tenantId), req.afterCursor);
      // A bounded replay: a position further back than the limit is refused before the watch starts
      // (the client pages through the list to catch up instead of pulling the whole feed through).
      if (last && (await posts.countPostsAfter(caller.tenantId, last, replayLimit + 1)) > replayLimit) {
        throw fail(
          "REPLAY_TOO_LONG",
          `more than ${replayLimit} posts were made after that position: page through the list to catch up, then watch from the newest`,
        );
      }
      // Subscribe before replaying, so nothing made during the replay is missed; duplicates are
      // dropped by position below. A watcher that falls too far behind is ended, not buffered for.
      const live = new AsyncQueue<PostRecord>({
        maxBuffered: MAX_WATCH_BACKLOG_BYTES,
        sizeOf: postBytes,
        overflow: () =>
          fail(
            "STREAM_READER_TOO_SLOW",
            "the watch fell too far behind the feed and was ended; resume from the last post received",
          ),
      });
      const unsubscribe = feed.subscribe(caller.tenantId, (post) => live.push(post));
      const end = () => live.close();
      ctx.signal.addEventListener("abort", end, { once: true });
      try {
        yield { subscribed: true };
        if (last) {
          for (;;) {
            const missed = await posts.listPostsAfter(caller.tenantId, last, REPLAY_PAGE);
            for (const post of missed) {
              yield { post: postToProto(post) };
              last = postKeyset(post);
            }
            if (missed.length < REPLAY_PAGE || ctx.signal.aborted) break;
          }
        }
        if (req.untilCaughtUp) {
          yield { caughtUp: true };
          return;
        }
        for await (const post of live) {
          const key = postKeyset(post);
          if (last && !keysetAfter(key, last)) continue;
          last = key;
          yield { post: postToProto(post) satisfies Post };
        }
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", end);
      }
    },

    async listCatalogItems(req) {
      const { page, pageSize } = catalogPage(req.page, req.pageSize);
      const { items, total } = await catalog.listCatalogItems((page - 1) * pageSize, pageSize);
      return { items: items.map(catalogItemToProto), page, pageSize, total: BigInt(total) };
    },

    async batchGetCatalogItems(req) {
      const skus = batchSkus(req.skus);
      const bySku = new Map((await catalog.getCatalogItems(skus)).map((i) => [i.sku, i]));
      return { items: skus.flatMap((sku) => (bySku.has(sku) ? [catalogItemToProto(bySku.get(sku)!)] : [])) };
    },

    async importItems(requests, ctx) {
      const caller = callerOf(ctx);
      requireCatalogOwner(caller, catalogOwnerTenant);
      const summary = await importCatalogItems(requests, catalog, callScopeOf(ctx));
      // No edge cache serves a catalog page from before the import once this answers.
      await cacheLeases.applied();
      return summary;
    },

    async createImportJob(req, ctx) {
      const caller = callerOf(ctx);
      requireCatalogOwner(caller, catalogOwnerTenant);
      // Each item is kept as the ImportItemsRequest the job's worker will feed through ImportItems.
      const lines = importLines(
        req.lines.map((l) => ({
          line: l.line,
          request: l.item
            ? toBinary(ImportItemsRequestSchema, create(ImportItemsRequestSchema, { item: l.item }))
            : undefined,
          problem: l.problemCode !== "" ? { code: l.problemCode, message: l.problemMessage } : undefined,
        })),
      );
      // Keys stored before keys had principals were the tenant's, and only the catalog owner's admins make jobs: they replay as before.
      const key = {
        principal: principalOf(caller),
        key: req.idempotencyKey,
        requestHash: linesFingerprint(lines),
        ownsUnscoped: () => true,
        call: callScopeOf(ctx),
      };
      const { job, replayed } = await importJobs.createImportJob(caller.tenantId, caller.userId, key, lines);
      if (!replayed) importJobQueued?.();
      return { job: importJobToProto(job), replayed };
    },

    async getImportJob(req, ctx) {
      const caller = callerOf(ctx);
      // Admins only, decided before the job is looked up: a member learns nothing of which ids exist.
      requireRole(caller, "admin");
      const job = isIdOf("imp", req.jobId) ? await importJobs.getImportJob(caller.tenantId, req.jobId) : undefined;
      if (!job) throw fail("NOT_FOUND", "import job not found");
      return { job: importJobToProto(job) };
    },

    async *watchCacheChanges(_req, ctx) {
      type Batch = { changes: readonly CacheChangeRecord[]; position: bigint };
      const queue = new AsyncQueue<Batch>({
        maxBuffered: MAX_CACHE_BACKLOG,
        sizeOf: (b) => b.changes.length + 1,
        overflow: () =>
          fail(
            "STREAM_READER_TOO_SLOW",
            "the cache fell too far behind the change stream and was ended; resynchronise",
          ),
      });
      const { position, unsubscribe } = cacheLog.subscribe((changes, at) => queue.push({ changes, position: at }));
      const end = () => queue.close();
      ctx.signal.addEventListener("abort", end, { once: true });
      try {
        yield { subscribed: true, position };
        for await (const batch of queue)
          yield { changes: batch.changes.map(cacheChangeToProto), position: batch.position };
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", end);
      }
    },

    async renewCacheLease(req, ctx) {
      const { subscriberId, appliedPosition } = cacheLeaseRenewal(req);
      if (req.release) {
        await cacheLeases.release(subscriberId);
        return { leaseMs: 0, requiredPosition: 0n };
      }
      const { requiredPosition, extended } = await cacheLeases.renew(subscriberId, appliedPosition, callScopeOf(ctx));
      return { leaseMs: extended ? cacheLeases.leaseMs : 0, requiredPosition };
    },
  };
}

// /v1/docs, /v1/posts (JSON pages, or a live Server-Sent Events feed), /v1/catalog/items and
// /v1/catalog/imports, translated to ContentService calls. Entity tags travel in ETag / If-Match /
// If-None-Match. An import is a job of the content service: the gateway hands it the lines and reads it back.
// Catalog pages and documents are answered from the edge cache when it holds them (runtime/edge-cache.ts),
// serialized once per version of the representation.
import { create, toBinary } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import {
  CreateImportJobRequestSchema,
  type Post,
  type WatchPostsResponse,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { fail } from "@switchyard/platform/errors.js";
import { MAX_MESSAGE_BYTES } from "@switchyard/platform/message-limits.js";
import { cursorAfter } from "@switchyard/platform/paging.js";
import { accepted, created, type RouteContext, type RouteGroup } from "../runtime/route.js";
import { noneMatchHits } from "../runtime/conditional.js";
import { edgeError } from "../runtime/errors.js";
import type { IsNew, LiveEvent, OpenOwn, OpenShared } from "../runtime/live-fanout.js";
import type { Upstreams } from "../upstreams.js";
import { bearerOf } from "../runtime/upstream-headers.js";
import { cursorParam, listResult, pageSizeParam } from "../runtime/pagination.js";
import { catalogItemJson, documentJson, importJobJson, postJson } from "../representations/content.js";
import { CATALOG_GROUP, documentGroup, type CachedAnswer, type FillTicket } from "../runtime/edge-cache.js";
import type { RouteResult } from "../runtime/route.js";

interface CatalogItemImport {
  sku: string;
  name: string;
  price: number;
  currency: string;
}

/** An import that content would not take in one message is refused here, whatever the body limit. */
const MAX_IMPORT_MESSAGE_BYTES = MAX_MESSAGE_BYTES - 64 * 1024;

const postEvent = (post: Post): LiveEvent => ({ id: post.cursor, event: "post", data: postJson(post) });

/** The tenant's shared tail of the feed (runtime/live-fanout.ts): only new posts, after a position. */
function sharedPosts(content: Upstreams["content"]): OpenShared {
  return async (position, headers, signal) => {
    // Without a position, the tail starts after the newest post there is (not at "whatever comes
    // next"), so a reopening resumes from a position even before the first post arrived. An empty
    // feed has none: a post made while its stream reopens before any arrived is not replayed.
    const after = position || ((await content.listPosts({ pageSize: 1 }, { signal, headers })).posts[0]?.cursor ?? "");
    const stream = content.watchPosts({ afterCursor: after }, { signal, headers })[Symbol.asyncIterator]();
    await stream.next(); // subscribed
    return {
      after,
      async *[Symbol.asyncIterator]() {
        for (let r = await stream.next(); !r.done; r = await stream.next())
          if (r.value.post) yield postEvent(r.value.post);
      },
    };
  };
}

/**
 * A subscriber's own stream, after a position, once content confirmed it (it authorizes the caller):
 * the posts it replays, noting the last one's id in `progress`, until content says it has caught up.
 */
function ownPosts(content: Upstreams["content"], options: CallOptions, progress: { position: string }): OpenOwn {
  return async (position, signal) => {
    const own = content
      .watchPosts({ afterCursor: position, untilCaughtUp: true }, { ...options, signal })
      [Symbol.asyncIterator]();
    await own.next(); // subscribed
    return { [Symbol.asyncIterator]: () => replayed(own, progress) };
  };
}

async function* replayed(own: AsyncIterator<WatchPostsResponse>, progress: { position: string }) {
  for (;;) {
    const r = await own.next();
    if (r.done) throw fail("UPSTREAM_UNAVAILABLE", "the live feed's upstream ended the stream");
    if (r.value.caughtUp) break;
    if (!r.value.post) continue;
    const event = postEvent(r.value.post);
    progress.position = event.id;
    yield event;
  }
  // Content ends the stream after that message: read it to its end rather than cancel it (a
  // cancellation is a reset, and HTTP/2 servers cut a connection that resets too many). A drop now
  // loses nothing: everything was read.
  try {
    while (!(await own.next()).done);
  } catch {
    // caught up already
  }
}

/**
 * Which posts of the shared tail the subscriber still needs: those after the last one its own stream
 * sent (the tail may lag behind it while the shared stream reopens, and replays from its own position).
 */
function postsAfter(position: string): IsNew {
  if (position === "") return () => true;
  return (event) => {
    try {
      return cursorAfter(event.id, position);
    } catch {
      return true; // a position beyond reading: a post twice rather than none
    }
  };
}

/** The answer kept under `key` when the edge cache may answer now, noting the cache's part in the request. */
function fromEdge(ctx: RouteContext, key: string): CachedAnswer | undefined {
  const cache = ctx.edgeCache;
  if (!cache) return undefined;
  if (!cache.active) {
    ctx.cacheResult("bypass");
    return undefined;
  }
  const hit = cache.lookup(key);
  ctx.cacheResult(hit ? "hit" : "miss");
  return hit;
}

/** An upstream's 200 answer: its body, with the headers and entity tag it is sent with. */
interface FreshAnswer {
  body: unknown;
  headers?: Record<string, string>;
  etag?: string;
}

/** An upstream's answer, serialized once, kept when nothing of its group changed while it was read. */
function keep(ctx: RouteContext, ticket: FillTicket | undefined, key: string, fresh: FreshAnswer): CachedAnswer {
  const { body, headers = {}, etag } = fresh;
  const answer: CachedAnswer = {
    status: 200,
    headers,
    body: Buffer.from(JSON.stringify(body)),
    ...(etag !== undefined ? { etag } : {}),
  };
  if (ticket) ctx.edgeCache!.fill(ticket, key, answer);
  return answer;
}

/** A kept answer as the pipeline sends it: 304 when If-None-Match names its tag. */
function answerWith(answer: CachedAnswer, ifNoneMatch: unknown): RouteResult {
  if (answer.etag !== undefined && noneMatchHits(ifNoneMatch, answer.etag))
    return { status: 304, headers: answer.headers };
  return { status: answer.status, serialized: answer.body, headers: answer.headers };
}

export const contentRoutes: RouteGroup = {
  upstream: "content",
  handlers: {
    async createDocument(ctx) {
      const { title, body } = ctx.body as { title: string; body: string };
      const { document } = await ctx.upstreams.content.createDocument({ title, body }, ctx.callOptions());
      const result = created(documentJson(document!), `${ctx.base}/docs/${document!.id}`);
      return { ...result, headers: { ...result.headers, etag: document!.etag } };
    },

    async getDocument(ctx) {
      const documentId = ctx.params.doc_id as string;
      // Kept per tenant: the verified token's tenant is the only one whose documents a caller may read
      // (content's rule, applied here too), and a caller of another tenant finds nothing under this key.
      const { tenantId } = ctx.caller!;
      const key = `doc\u0000${tenantId}\u0000${documentId}\u0000v${ctx.version}`;
      const kept = fromEdge(ctx, key);
      if (kept) return answerWith(kept, ctx.params["if-none-match"]);
      const ticket = ctx.edgeCache?.ticket(documentGroup(tenantId, documentId));
      const { document } = await ctx.upstreams.content.getDocument({ documentId }, ctx.callOptions());
      const headers = { etag: document!.etag, "cache-control": "private, no-cache" };
      return answerWith(
        keep(ctx, ticket, key, { body: documentJson(document!), headers, etag: document!.etag }),
        ctx.params["if-none-match"],
      );
    },

    async updateDocument(ctx) {
      const { title, body } = ctx.body as { title: string; body: string };
      const ifMatch = typeof ctx.params["if-match"] === "string" ? ctx.params["if-match"] : "";
      const { document } = await ctx.upstreams.content.updateDocument(
        { documentId: ctx.params.doc_id as string, title, body, ifMatch },
        ctx.callOptions(),
      );
      return { status: 200, body: documentJson(document!), headers: { etag: document!.etag } };
    },

    async createPost(ctx) {
      const { title, body } = ctx.body as { title: string; body: string };
      const { post } = await ctx.upstreams.content.createPost({ title, body }, ctx.callOptions());
      return created(postJson(post!), `${ctx.base}/posts/${post!.id}`);
    },

    async getPost(ctx) {
      const { post } = await ctx.upstreams.content.getPost({ postId: ctx.params.post_id as string }, ctx.callOptions());
      return { status: 200, body: postJson(post!) };
    },

    async listPosts(ctx) {
      if (ctx.eventStream) {
        const caller = ctx.caller!;
        const options = ctx.streamCallOptions();
        const signal = options.signal!;
        // Join the tenant's shared tail first, so nothing made while this subscriber catches up is missed.
        const live = await ctx.fanout.join(
          `posts/${caller.tenantId}`,
          { headers: { authorization: bearerOf(caller) }, expiresAt: caller.expiresAt },
          sharedPosts(ctx.upstreams.content),
        );
        // The stream's end (the client gone, its token ended, the stream over) aborts the signal: it leaves the shared tail then.
        signal.addEventListener("abort", live.leave, { once: true });
        if (signal.aborted) live.leave();
        try {
          // Content decides whether the caller may watch, and replays after the last event the client
          // saw (the SSE reconnect header); the first message confirms the watch, so errors before it
          // are plain HTTP errors. A drop later on reopens it after the last post it sent.
          const after = typeof ctx.params["last-event-id"] === "string" ? ctx.params["last-event-id"] : "";
          const progress = { position: after };
          const own = ownPosts(ctx.upstreams.content, options, progress);
          const first = await own(after, signal);
          // Its replay first, then the shared tail less what the replay already sent.
          return {
            status: 200,
            lastEventId: after || live.after,
            events: ctx.fanout.resumable(first, own, after, signal),
            follow: (writer) => live.follow(postsAfter(progress.position), writer),
          };
        } catch (err) {
          live.leave();
          throw err;
        }
      }
      const res = await ctx.upstreams.content.listPosts(
        { pageSize: pageSizeParam(ctx.params.limit), pageToken: cursorParam(ctx.params.cursor) },
        ctx.callOptions(),
      );
      return listResult(ctx.path, ctx.params.limit, res.posts.map(postJson), res.nextPageToken);
    },

    async createCatalogImport(ctx) {
      // Every line goes to content: an item, or — for a line that is none — why (a per-line error of the job).
      const lines = (ctx.lines ?? []).map(({ line, value, problem }) => {
        if (problem)
          return {
            line,
            problemCode: problem.status === 422 ? "RULE_VIOLATION" : "INVALID_REQUEST",
            problemMessage: problem.message,
          };
        const item = value as CatalogItemImport;
        return { line, item: { sku: item.sku, name: item.name, price: BigInt(item.price), currency: item.currency } };
      });
      const request = create(CreateImportJobRequestSchema, {
        idempotencyKey: ctx.params["idempotency-key"] as string,
        lines,
      });
      if (toBinary(CreateImportJobRequestSchema, request).byteLength > MAX_IMPORT_MESSAGE_BYTES) {
        throw edgeError("PAYLOAD_TOO_LARGE", "the import is too large for one job: split it into several");
      }
      const { job, replayed } = await ctx.upstreams.content.createImportJob(request, ctx.callOptions());
      return accepted(importJobJson(job!), `${ctx.base}/catalog/imports/${job!.id}`, replayed);
    },

    async getCatalogImport(ctx) {
      const { job } = await ctx.upstreams.content.getImportJob(
        { jobId: ctx.params.job_id as string },
        ctx.callOptions(),
      );
      return { status: 200, body: importJobJson(job!) };
    },

    async listCatalogItems(ctx) {
      const page = (ctx.params.page as number | undefined) ?? 0;
      const pageSize = (ctx.params.page_size as number | undefined) ?? 0;
      const key = `catalog\u0000v${ctx.version}\u0000${page}\u0000${pageSize}`;
      const kept = fromEdge(ctx, key);
      if (kept) return answerWith(kept, undefined);
      const ticket = ctx.edgeCache?.ticket(CATALOG_GROUP);
      const res = await ctx.upstreams.content.listCatalogItems({ page, pageSize }, ctx.callOptions());
      const body = {
        items: res.items.map(catalogItemJson),
        page: res.page,
        page_size: res.pageSize,
        total: Number(res.total),
      };
      if (!ctx.edgeCache) return { status: 200, body };
      return answerWith(keep(ctx, ticket, key, { body }), undefined);
    },
  },
};

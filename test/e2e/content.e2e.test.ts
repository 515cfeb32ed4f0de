// End to end through the real mesh: content — documents with entity tags (conditional GET and PUT,
// also under 100 concurrent writers), the posts feed as keyset pages (stable while posts are added)
// and as a live Server-Sent Events stream (heartbeats, replay with Last-Event-ID, plain HTTP errors,
// tenant isolation, no leaked upstream streams), the public catalog (offset pages), and ImportItems
// over gRPC from a client other than the serving library (connect-node).
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { request as httpRequest, type ClientRequest, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import {
  ALICE,
  BOB,
  b64url,
  CAROL,
  expectError,
  expectUnauthenticated,
  startE2eMesh,
  unique,
  type Api,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";

const DOC_KEYS = ["body", "created_at", "id", "title", "updated_at"];
const POST_KEYS = ["author_id", "body", "created_at", "id", "title"];
const CATALOG_PAGE_KEYS = ["items", "page", "page_size", "total"];
const CATALOG_ITEM_KEYS = ["currency", "name", "price", "sku", "updated_at"];
const DOC_ID = /^doc_[A-Za-z0-9_-]{20}$/;
const POST_ID = /^post_[A-Za-z0-9_-]{20}$/;
/** A strong entity tag: quoted, opaque, not W/. */
const STRONG_ETAG = /^"[\x21\x23-\x7e]+"$/;
/** The demo catalog (services/content/src/demo-data.ts), in the catalog's order (by sku). */
const DEMO_SKUS = ["BOOK-1", "MUG-1", "PEN-1", "SHIRT-1", "STICKER-1"];

interface PostJson {
  id: string;
  title: string;
  body: string;
  author_id: number;
  created_at: string;
}

// ---------------------------------------------------------------------------------------------
// A Server-Sent Events client on node:http: the stream is read as it arrives and can be closed.

interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

interface SseStream {
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** Everything received, as text. */
  readonly raw: string;
  readonly frames: SseFrame[];
  posts(): PostJson[];
  postFrames(): SseFrame[];
  waitFor(predicate: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Every stream and curl the tests start, so `after` can end whatever a failing test left open. */
const openStreams = new Set<SseStream>();
const children = new Set<ChildProcess>();

function parseBlock(block: string): SseFrame {
  const frame: SseFrame = { comments: [] };
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) {
      frame.comments.push(line.slice(1).replace(/^ /, ""));
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") frame.id = value;
    else if (field === "event") frame.event = value;
    else if (field === "data") frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
    else if (field === "retry") frame.retry = value;
  }
  return frame;
}

function openSse(url: string, headers: Record<string, string>): SseStream {
  let status = 0;
  let responseHeaders: IncomingHttpHeaders = {};
  let raw = "";
  let buffer = "";
  const frames: SseFrame[] = [];
  // agent: false — a connection of its own, gone when the stream is closed.
  const req: ClientRequest = httpRequest(url, { agent: false, headers: { accept: "text/event-stream", ...headers } });
  const closed = new Promise<void>((resolve) => req.once("close", () => resolve()));
  const opened = new Promise<void>((resolve, reject) => {
    req.once("error", reject);
    req.once("response", (res) => {
      status = res.statusCode ?? 0;
      responseHeaders = res.headers;
      res.on("error", () => {}); // ours to close: an abort is not a failure
      res.setEncoding("utf8").on("data", (chunk: string) => {
        raw += chunk;
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          frames.push(parseBlock(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
      });
      resolve();
    });
  });
  req.on("error", () => {}); // after the response, errors are the hang-ups we cause
  req.end();
  const stream: SseStream = {
    opened,
    closed,
    get status() {
      return status;
    },
    get headers() {
      return responseHeaders;
    },
    get raw() {
      return raw;
    },
    frames,
    postFrames: () => frames.filter((f) => f.event === "post"),
    posts: () => frames.filter((f) => f.event === "post").map((f) => JSON.parse(f.data ?? "null") as PostJson),
    async waitFor(predicate, what, timeoutMs = 8_000) {
      const until = Date.now() + timeoutMs;
      while (!predicate() && Date.now() < until) await sleep(20);
      expect(predicate(), `${what}; the stream so far:\n${raw.slice(-3_000)}`).to.equal(true);
    },
    async close() {
      if (!req.destroyed) req.destroy();
      await closed;
      openStreams.delete(stream);
    },
  };
  openStreams.add(stream);
  return stream;
}

// ---------------------------------------------------------------------------------------------

describe("e2e: content through the gateway (documents, posts feed, catalog, ImportItems)", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let bob: string;
  let carol: string;
  let grpcSessions: Http2SessionManager | undefined;

  before(async function () {
    this.timeout(90_000);
    env = await startE2eMesh("content", {
      envFor: {
        gateway: {
          GATEWAY_SSE_HEARTBEAT_MS: "1000",
          // The 100 concurrent writers are about entity tags, not shedding: keep the adaptive
          // concurrency limit out of their way (shedding has its own tests in edge.e2e.test.ts).
          GATEWAY_CONCURRENCY_INITIAL: "1000",
          GATEWAY_CONCURRENCY_MIN: "1000",
          GATEWAY_CONCURRENCY_MAX: "1000",
        },
      },
    });
    api = env.api;
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
  });

  after(async function () {
    this.timeout(30_000);
    for (const child of children) child.kill("SIGKILL");
    await Promise.all([...openStreams].map((s) => s.close()));
    grpcSessions?.abort();
    await env?.stop();
  });

  const feedUrl = () => `${env.mesh.gatewayUrl}/v1/posts`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** Opens the live feed and waits for its 200 (the watch is confirmed by then). */
  async function openFeed(token: string, lastEventId?: string): Promise<SseStream> {
    const stream = openSse(feedUrl(), {
      ...bearer(token),
      ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }),
    });
    await stream.opened;
    expect(stream.status, stream.raw).to.equal(200);
    return stream;
  }

  async function createPost(title: string, token = alice): Promise<PostJson> {
    const res = await api.post("/v1/posts", { token, json: { title, body: `body of ${title}` } });
    expect(res.status, res.text).to.equal(201);
    expect(res.json.id).to.match(POST_ID);
    expect(res.headers.get("location")).to.equal(`/v1/posts/${res.json.id}`);
    return res.json as PostJson;
  }

  async function createDoc(
    title = `Runbook ${unique()}`,
    body = "v1",
    token = alice,
  ): Promise<{ path: string; etag: string; res: ApiResponse }> {
    const res = await api.post("/v1/docs", { token, json: { title, body } });
    expect(res.status, res.text).to.equal(201);
    return { path: res.headers.get("location")!, etag: res.headers.get("etag")!, res };
  }

  const putDoc = (path: string, json: unknown, ifMatch?: string, token = alice) =>
    api.request("PUT", path, { token, json, ...(ifMatch === undefined ? {} : { headers: { "if-match": ifMatch } }) });

  /** (created_at, id) strictly descending: the feed's order, newest first. */
  function expectNewestFirst(items: PostJson[]): void {
    for (let i = 1; i < items.length; i++) {
      const prev = items[i - 1]!;
      const cur = items[i]!;
      const [tp, tc] = [Date.parse(prev.created_at), Date.parse(cur.created_at)];
      expect(
        tp > tc || (tp === tc && prev.id > cur.id),
        `order at ${i}: ${prev.created_at} ${prev.id} then ${cur.created_at} ${cur.id}`,
      ).to.equal(true);
    }
  }

  // -------------------------------------------------------------------------------------------
  describe("documents and entity tags", () => {
    it("POST → 201 + Location + a quoted ETag; GET → 200 + the same ETag; If-None-Match: the tag → 304 empty, another tag → 200", async () => {
      const { path, etag, res } = await createDoc("Runbook", "v1");
      expect(Object.keys(res.json).sort()).to.deep.equal(DOC_KEYS);
      expect(res.json.id).to.match(DOC_ID);
      expect(res.json).to.include({ title: "Runbook", body: "v1" });
      expect(path).to.equal(`/v1/docs/${res.json.id}`);
      expect(etag, "ETag").to.match(STRONG_ETAG);
      expect(res.text, "the tag travels in the header, not the body").to.not.include(etag.slice(1, -1));

      const got = await api.get(path, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json).to.deep.equal(res.json);
      expect(got.headers.get("etag")).to.equal(etag);

      for (const held of [etag, `W/${etag}`, `"something-else", ${etag}`, "*"]) {
        const notModified = await api.get(path, { token: alice, headers: { "if-none-match": held } });
        expect(notModified.status, `If-None-Match: ${held} → ${notModified.text}`).to.equal(304);
        expect(notModified.text, "a 304 has no body").to.equal("");
        expect(notModified.headers.get("etag"), "a 304 still names the current tag").to.equal(etag);
      }
      const other = await api.get(path, { token: alice, headers: { "if-none-match": '"not-the-current-tag"' } });
      expect(other.status, other.text).to.equal(200);
      expect(other.json).to.deep.equal(res.json);
      expect(other.headers.get("etag")).to.equal(etag);
    });

    it("PUT If-Match: current → 200 + a new ETag; stale → 412 ETAG_MISMATCH with nothing stored; no If-Match → 200 (unconditional)", async () => {
      const { path, etag: tag1, res: created } = await createDoc("Runbook", "v1");

      const saved = await putDoc(path, { title: "Runbook, second", body: "v2" }, tag1);
      expect(saved.status, saved.text).to.equal(200);
      expect(Object.keys(saved.json).sort()).to.deep.equal(DOC_KEYS);
      expect(saved.json).to.include({
        id: created.json.id,
        title: "Runbook, second",
        body: "v2",
        created_at: created.json.created_at,
      });
      expect(Date.parse(saved.json.updated_at)).to.be.at.least(Date.parse(created.json.updated_at));
      const tag2 = saved.headers.get("etag")!;
      expect(tag2).to.match(STRONG_ETAG).and.not.equal(tag1);

      const read2 = await api.get(path, { token: alice });
      expect(read2.json).to.deep.equal(saved.json);
      expect(read2.headers.get("etag")).to.equal(tag2);
      // The old tag no longer matches: a full answer, not 304.
      expect((await api.get(path, { token: alice, headers: { "if-none-match": tag1 } })).status).to.equal(200);

      // A writer still holding tag1 loses, and nothing of its write is stored.
      const stale = await putDoc(path, { title: "Lost update", body: "v2-from-a-stale-copy" }, tag1);
      expectError(stale, 412, "ETAG_MISMATCH");
      const afterStale = await api.get(path, { token: alice });
      expect(afterStale.json).to.deep.equal(saved.json);
      expect(afterStale.headers.get("etag")).to.equal(tag2);

      // Without If-Match the write is unconditional (documented), and it moves the tag too.
      const blind = await putDoc(path, { title: "Runbook, third", body: "v3" });
      expect(blind.status, blind.text).to.equal(200);
      const tag3 = blind.headers.get("etag")!;
      expect(tag3).to.match(STRONG_ETAG);
      expect([tag1, tag2]).to.not.include(tag3);
      const read3 = await api.get(path, { token: alice });
      expect(read3.json).to.include({ title: "Runbook, third", body: "v3" });
      expect(read3.headers.get("etag")).to.equal(tag3);
      expectError(await putDoc(path, { title: "x", body: "y" }, tag2), 412, "ETAG_MISMATCH");
      expect((await api.get(path, { token: alice })).json.body).to.equal("v3");
    });

    it("validates writes against the contract: empty title → 422 (minLength), blank title → 422, unknown/missing field or wrong type → 400", async () => {
      // v1.yaml DocumentWrite: title minLength 1 / maxLength 200 — a value constraint, so 422 RULE_VIOLATION.
      expectError(await api.post("/v1/docs", { token: alice, json: { title: "", body: "x" } }), 422, "RULE_VIOLATION");
      expectError(
        await api.post("/v1/docs", { token: alice, json: { title: "t".repeat(201), body: "x" } }),
        422,
        "RULE_VIOLATION",
      );
      // Passes the schema, breaks the service's rule (a title of spaces only).
      expectError(
        await api.post("/v1/docs", { token: alice, json: { title: "   ", body: "x" } }),
        422,
        "RULE_VIOLATION",
      );
      expectError(
        await api.post("/v1/docs", { token: alice, json: { title: "t", body: "x", owner: "mallory" } }),
        400,
        "INVALID_REQUEST",
      );
      expectError(await api.post("/v1/docs", { token: alice, json: { title: "t" } }), 400, "INVALID_REQUEST");
      expectError(await api.post("/v1/docs", { token: alice, json: { title: 7, body: "x" } }), 400, "INVALID_REQUEST");

      const { path, etag } = await createDoc("Valid", "v1");
      expectError(await putDoc(path, { title: "", body: "v2" }, etag), 422, "RULE_VIOLATION");
      expectError(await putDoc(path, { title: "ok", body: "v2", etag }, etag), 400, "INVALID_REQUEST");
      const unchanged = await api.get(path, { token: alice });
      expect(unchanged.json).to.include({ title: "Valid", body: "v1" });
      expect(unchanged.headers.get("etag"), "a refused write moves nothing").to.equal(etag);
    });

    it("another tenant's document is 404 for reading and writing; a malformed or unknown id is 404; no token is 401", async () => {
      const { path, etag } = await createDoc("Acme only", "secret plans");
      const peek = await api.get(path, { token: carol });
      expectError(peek, 404, "NOT_FOUND");
      expect(peek.text).to.not.include("secret plans");
      expectError(await putDoc(path, { title: "Globex was here", body: "x" }, etag, carol), 404, "NOT_FOUND");
      expectError(await putDoc(path, { title: "Globex was here", body: "x" }, undefined, carol), 404, "NOT_FOUND");
      const still = await api.get(path, { token: alice });
      expect(still.json).to.include({ title: "Acme only", body: "secret plans" });
      expect(still.headers.get("etag")).to.equal(etag);

      for (const id of [
        "not-a-doc-id",
        "doc_short",
        `pay_${"A".repeat(20)}`,
        `doc_${"A".repeat(20)}`,
        "doc_%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21%21",
      ]) {
        expectError(await api.get(`/v1/docs/${id}`, { token: alice }), 404, "NOT_FOUND");
      }
      expectError(await putDoc(`/v1/docs/doc_${"A".repeat(20)}`, { title: "t", body: "b" }), 404, "NOT_FOUND");
      // v1.yaml: doc_id maxLength 64 — a malformed parameter is a 400 before any lookup.
      expectError(await api.get(`/v1/docs/${"d".repeat(65)}`, { token: alice }), 400, "INVALID_REQUEST");
      expectUnauthenticated(await api.get(path));
    });

    it("100 concurrent PUTs with the same current tag: exactly one 200, 99 × 412, and the winner's body is stored", async function () {
      this.timeout(60_000);
      const { path, etag } = await createDoc("Contended", "v0");
      const writers = Array.from({ length: 100 }, (_, i) => ({
        title: `Contended by writer ${i}`,
        body: `body of writer ${i}`,
      }));
      const answers = await Promise.all(writers.map((w) => putDoc(path, w, etag)));
      const statuses = answers.map((a) => a.status);
      const winners = answers.filter((a) => a.status === 200);
      expect(winners.length, `statuses: ${JSON.stringify(statuses)}`).to.equal(1);
      expect(statuses.filter((s) => s === 412).length, `statuses: ${JSON.stringify(statuses)}`).to.equal(99);
      for (const loser of answers.filter((a) => a.status !== 200)) expectError(loser, 412, "ETAG_MISMATCH");

      const winner = winners[0]!;
      const index = answers.indexOf(winner);
      expect(winner.json).to.include(writers[index]!);
      const stored = await api.get(path, { token: alice });
      expect(stored.json).to.deep.equal(winner.json);
      expect(stored.headers.get("etag")).to.equal(winner.headers.get("etag")).and.not.equal(etag);
      // The tag moved exactly once: the winner's tag is current, the original one is stale.
      expectError(await putDoc(path, { title: "late", body: "late" }, etag), 412, "ETAG_MISMATCH");
      const next = await putDoc(path, { title: "after the race", body: "fine" }, winner.headers.get("etag")!);
      expect(next.status, next.text).to.equal(200);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("posts feed: keyset pages", () => {
    it("walks pages of 7 newest first with next_cursor and Link; posts made between fetches neither repeat nor leave a gap", async function () {
      this.timeout(60_000);
      const run = unique();
      const made: PostJson[] = [];
      for (let i = 0; i < 30; i++) made.push(await createPost(`page-${run}-${i}`));

      // What exists when paging begins (the tenant may hold posts of other tests too).
      const existing = (await api.listAll("/v1/posts", alice)) as PostJson[];
      expect(existing.length).to.be.at.least(30);
      expectNewestFirst(existing);
      expect(new Set(existing.map((p) => p.id)).size).to.equal(existing.length);
      const madeIds = new Set(made.map((p) => p.id));
      expect(
        existing.filter((p) => madeIds.has(p.id)).map((p) => p.id),
        "all 30 listed, newest first",
      ).to.deep.equal([...made].reverse().map((p) => p.id));
      expect(existing.find((p) => p.id === made[0]!.id)).to.deep.equal(made[0]);

      const walked: PostJson[] = [];
      const intruders: PostJson[] = [];
      let next: string | null = "/v1/posts?limit=7";
      let pages = 0;
      while (next !== null) {
        const res = await api.get(next, { token: alice });
        expect(res.status, res.text).to.equal(200);
        expect(Object.keys(res.json).sort()).to.deep.equal(["items", "next_cursor"]);
        pages++;
        const items = res.json.items as PostJson[];
        for (const item of items) expect(Object.keys(item).sort()).to.deep.equal(POST_KEYS);
        walked.push(...items);
        const cursor = res.json.next_cursor as string | null;
        const link = res.headers.get("link");
        if (cursor === null) {
          expect(link, "no Link on the last page").to.equal(null);
          expect(items.length).to.be.at.most(7);
          next = null;
        } else {
          expect(items.length).to.equal(7);
          expect(cursor)
            .to.be.a("string")
            .and.match(/^[A-Za-z0-9_-]+$/);
          expect(link).to.equal(`</v1/posts?limit=7&cursor=${cursor}>; rel="next"`);
          next = /^<([^>]+)>; rel="next"$/.exec(link!)![1]!;
          // Someone posts while we page: that goes to the head of the feed, not into our walk.
          intruders.push(await createPost(`intruder-${run}-${pages}`));
        }
        expect(pages).to.be.below(100);
      }
      expect(pages).to.equal(Math.ceil(existing.length / 7));
      expect(
        walked.map((p) => p.id),
        "no duplicate, no gap, same order",
      ).to.deep.equal(existing.map((p) => p.id));
      expect(walked).to.deep.equal(existing);
      expect(intruders.length).to.equal(pages - 1);
      // And the intruders are there for whoever starts again from the top.
      const top = await api.get(`/v1/posts?limit=${intruders.length}`, { token: alice });
      expect((top.json.items as PostJson[]).map((p) => p.id)).to.deep.equal([...intruders].reverse().map((p) => p.id));
    });

    it("a malformed or foreign cursor → 400 INVALID_CURSOR; limit outside 1–100 → 400; `page` is not a parameter (ignored: the first page)", async () => {
      for (const cursor of [
        "garbage",
        "!!!",
        b64url({ v: 1, c: "posts:acme", t: "soon", i: "post_x" }),
        b64url({ v: 1, c: "payments:acme", t: Date.now(), i: "post_AAAAAAAAAAAAAAAAAAAA" }),
      ]) {
        expectError(
          await api.get(`/v1/posts?cursor=${encodeURIComponent(cursor)}`, { token: alice }),
          400,
          "INVALID_CURSOR",
        );
      }
      // A real cursor of acme's feed is foreign to globex.
      const first = await api.get("/v1/posts?limit=1", { token: alice });
      const acmeCursor = first.json.next_cursor as string;
      expect(acmeCursor).to.be.a("string");
      expectError(await api.get(`/v1/posts?cursor=${acmeCursor}`, { token: carol }), 400, "INVALID_CURSOR");
      for (const limit of ["0", "101", "abc", "-1", "1.5"]) {
        expectError(await api.get(`/v1/posts?limit=${limit}`, { token: alice }), 400, "INVALID_REQUEST");
      }
      // No offset paging here: ?page=2 does not jump, it is not a parameter of this list.
      const plain = await api.get("/v1/posts?limit=5", { token: alice });
      const paged = await api.get("/v1/posts?limit=5&page=2", { token: alice });
      expect(paged.status, paged.text).to.equal(200);
      expect(paged.json.items).to.deep.equal(plain.json.items);
      expect(paged.json.next_cursor).to.equal(plain.json.next_cursor);
    });

    it("GET /v1/posts/{post_id}: the post; another tenant's or a malformed id → 404", async () => {
      const made = await createPost(`single-${unique()}`);
      const got = await api.get(`/v1/posts/${made.id}`, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json).to.deep.equal(made);
      expectError(await api.get(`/v1/posts/${made.id}`, { token: carol }), 404, "NOT_FOUND");
      expectError(await api.get("/v1/posts/not-a-post", { token: alice }), 404, "NOT_FOUND");
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("posts feed: live (Server-Sent Events)", () => {
    it("sends retry: first, then one `post` event per new post in order, heartbeats while idle; Last-Event-ID replays exactly what was missed, then live", async function () {
      this.timeout(45_000);
      const run = unique();
      const first = await openFeed(alice);
      expect(String(first.headers["content-type"])).to.match(/^text\/event-stream\b/);
      expect(String(first.headers["cache-control"])).to.include("no-cache");
      await first.waitFor(() => first.raw.includes("\n\n"), "the first frame");
      expect(first.raw.split("\n")[0], "the first line").to.match(/^retry: \d+$/);
      expect(first.frames[0]?.retry).to.match(/^\d+$/);

      const made = [
        await createPost(`live-${run}-1`),
        await createPost(`live-${run}-2`),
        await createPost(`live-${run}-3`),
      ];
      await first.waitFor(() => first.postFrames().length >= 3, "three post events");
      const frames = first.postFrames();
      expect(frames.length).to.equal(3);
      expect(first.posts(), "the events' data are the posts as created, in order").to.deep.equal(made);
      for (const f of frames)
        expect(f.id)
          .to.be.a("string")
          .and.match(/^[A-Za-z0-9_-]+$/);
      expect(new Set(frames.map((f) => f.id)).size).to.equal(3);
      // The event id is the post's keyset position: as a page cursor it continues right after that post.
      const afterThird = await api.get(`/v1/posts?limit=2&cursor=${frames[2]!.id!}`, { token: alice });
      expect(afterThird.status, afterThird.text).to.equal(200);
      expect((afterThird.json.items as PostJson[]).map((p) => p.id)).to.deep.equal([made[1]!.id, made[0]!.id]);

      // Idle: heartbeat comments keep the connection open (GATEWAY_SSE_HEARTBEAT_MS=1000 here).
      const framesBefore = first.frames.length;
      await sleep(1_500);
      await first.waitFor(
        () => first.frames.slice(framesBefore).some((f) => f.comments.includes("keep-alive")),
        "a `: keep-alive` comment while idle",
        3_000,
      );
      expect(first.raw).to.include("\n: keep-alive\n\n");
      expect(first.postFrames().length, "heartbeats are not events").to.equal(3);

      const lastSeen = frames[2]!.id!;
      await first.close();
      const missed = [await createPost(`missed-${run}-1`), await createPost(`missed-${run}-2`)];

      const resumed = await openFeed(alice, lastSeen);
      await resumed.waitFor(() => resumed.postFrames().length >= 2, "the two missed posts, replayed");
      await sleep(300);
      expect(resumed.posts(), "exactly the missed posts, oldest first").to.deep.equal(missed);
      const live = await createPost(`after-resume-${run}`);
      await resumed.waitFor(() => resumed.postFrames().length >= 3, "then the live one");
      await sleep(300);
      expect(resumed.posts(), "no duplicates, nothing missing").to.deep.equal([...missed, live]);
      await resumed.close();
    });

    it("a burst of concurrent posts reaches a live stream (and a resumed one) completely, each once", async function () {
      this.timeout(30_000);
      // On embedded storage inserts are serialised a few ms apart; the burst still guards the feed's
      // ordering assumptions (positions are (created_at, id), delivery is commit order).
      const BURST = 40;
      const run = unique();
      const live = await openFeed(alice);
      const marker = await createPost(`burst-marker-${run}`);
      await live.waitFor(() => live.posts().some((p) => p.id === marker.id), "the marker post");
      const markerId = live.postFrames().find((f) => f.data?.includes(marker.id))!.id!;
      const burst = await Promise.all(Array.from({ length: BURST }, (_, i) => createPost(`burst-${run}-${i}`)));
      const ids = new Set(burst.map((p) => p.id));
      const lostFrom = (s: SseStream) => {
        const got = new Set(s.posts().map((p) => p.id));
        return burst.filter((p) => !got.has(p.id)).map((p) => `${p.id} @ ${p.created_at}`);
      };
      const burstOn = (s: SseStream) => s.posts().filter((p) => ids.has(p.id)).length;
      await live
        .waitFor(() => burstOn(live) >= BURST, `all ${BURST} posts of the burst`, 5_000)
        .catch((err: unknown) => {
          throw new Error(
            `the live stream lost ${lostFrom(live).length} of ${BURST} concurrent posts: ${lostFrom(live).join(", ")}\n${String(err).slice(0, 500)}`,
          );
        });
      await sleep(300);
      expect(live.posts().length, "the marker and the burst, each once").to.equal(BURST + 1);
      await live.close();

      // Resuming from the marker replays the whole burst.
      const resumed = await openFeed(alice, markerId);
      await resumed
        .waitFor(() => burstOn(resumed) >= BURST, "the burst, replayed", 5_000)
        .catch((err: unknown) => {
          throw new Error(
            `the resumed stream lost ${lostFrom(resumed).length} of ${BURST} concurrent posts: ${lostFrom(resumed).join(", ")}\n${String(err).slice(0, 500)}`,
          );
        });
      await sleep(300);
      expect(
        resumed
          .posts()
          .map((p) => p.id)
          .sort(),
        "each once",
      ).to.deep.equal([...ids].sort());
      await resumed.close();
    });

    it("shows posts to a real `curl -N` as they are made", async () => {
      const curl = spawn(
        "curl",
        ["-sN", "-H", "Accept: text/event-stream", "-H", `Authorization: Bearer ${alice}`, feedUrl()],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      children.add(curl);
      const exited = new Promise<void>((resolve) => curl.once("exit", () => resolve()));
      let out = "";
      curl.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
      try {
        // The retry line arrives once the watch is confirmed upstream.
        for (let i = 0; i < 200 && !out.includes("\n\n"); i++) await sleep(25);
        expect(out, "curl's first line").to.match(/^retry: \d+\n/);
        const made = await createPost(`for-curl-${unique()}`);
        for (let i = 0; i < 200 && !out.includes(`"id":"${made.id}"`); i++) await sleep(25);
        const block = out.split("\n\n").find((b) => b.includes(`"id":"${made.id}"`));
        expect(block, `curl's output:\n${out}`).to.be.a("string");
        const frame = parseBlock(block!);
        expect(frame.event).to.equal("post");
        expect(frame.id).to.be.a("string").and.not.equal("");
        expect(JSON.parse(frame.data!)).to.deep.equal(made);
      } finally {
        curl.kill("SIGTERM");
        await exited;
        children.delete(curl);
      }
    });

    it("keeps tenants apart: carol's stream sees none of acme's posts", async () => {
      const run = unique();
      const [aliceFeed, carolFeed] = await Promise.all([openFeed(alice), openFeed(carol)]);
      const acmePost = await createPost(`acme-only-${run}`);
      const globexPost = await createPost(`globex-only-${run}`, carol);
      await aliceFeed.waitFor(() => aliceFeed.posts().length >= 1, "acme's post on alice's stream");
      await carolFeed.waitFor(() => carolFeed.posts().length >= 1, "globex's post on carol's stream");
      await sleep(300);
      expect(aliceFeed.posts()).to.deep.equal([acmePost]);
      expect(carolFeed.posts()).to.deep.equal([globexPost]);
      await Promise.all([aliceFeed.close(), carolFeed.close()]);
    });

    it("answers errors as plain HTTP before any stream: 401 without a token, 400 INVALID_CURSOR for a garbage or foreign Last-Event-ID", async () => {
      const sse = { accept: "text/event-stream" };
      const anonymous = await api.get("/v1/posts", { headers: sse });
      expectUnauthenticated(anonymous);
      expectUnauthenticated(await api.get("/v1/posts", { token: "not.a.jwt", headers: sse }));
      expectError(
        await api.get("/v1/posts", { token: alice, headers: { ...sse, "last-event-id": "garbage" } }),
        400,
        "INVALID_CURSOR",
      );
      expectError(
        await api.get("/v1/posts", {
          token: alice,
          headers: { ...sse, "last-event-id": b64url({ v: 1, c: "posts:acme", t: -1, i: "x" }) },
        }),
        400,
        "INVALID_CURSOR",
      );
      // v1.yaml: Last-Event-ID maxLength 512.
      expectError(
        await api.get("/v1/posts", { token: alice, headers: { ...sse, "last-event-id": "A".repeat(513) } }),
        400,
        "INVALID_REQUEST",
      );

      // An id seen on alice's stream is a position in acme's feed: globex cannot resume from it.
      const stream = await openFeed(alice);
      await createPost(`id-source-${unique()}`);
      await stream.waitFor(() => stream.postFrames().length >= 1, "one event");
      const acmeEventId = stream.postFrames()[0]!.id!;
      await stream.close();
      expectError(
        await api.get("/v1/posts", { token: carol, headers: { ...sse, "last-event-id": acmeEventId } }),
        400,
        "INVALID_CURSOR",
      );
      // The same id is fine for its own tenant (a stream opens).
      const own = await openFeed(alice, acmeEventId);
      await own.close();
    });

    it("answers HEAD with the stream's headers and no body, and closes (heartbeats, replays and live posts are not sent)", async () => {
      const url = new URL(api.baseUrl);
      const socket = connect({ host: url.hostname, port: Number(url.port) });
      const received: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      socket.write(
        `HEAD /v1/posts HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${alice}\r\naccept: text/event-stream\r\n\r\n`,
      );
      // A post made meanwhile and the 1 s heartbeat would both be body bytes if the stream went on.
      await createPost(`head-${unique()}`);
      const ended = await Promise.race([closed.then(() => true), sleep(3_000).then(() => false)]);
      socket.destroy();
      const text = Buffer.concat(received).toString("latin1");
      const headEnd = text.indexOf("\r\n\r\n");
      expect(text.slice(0, 15), text.slice(0, 200)).to.equal("HTTP/1.1 200 OK");
      expect(text.slice(0, headEnd).toLowerCase()).to.include("content-type: text/event-stream");
      expect(text.slice(headEnd + 4), "bytes after the head of a HEAD answer").to.equal("");
      expect(ended, "the gateway closes the connection").to.equal(true);
    });

    it("closing a stream releases it upstream without errors; the gateway keeps serving (JSON and streams)", async () => {
      const mark = env.mesh.logs.length;
      const stream = await openFeed(alice);
      await stream.close();
      await sleep(1_000);
      const lines = env.mesh.logs.slice(mark).join("").split("\n").filter(Boolean);
      const bad = lines.filter(
        (l) =>
          /"level":"(error|fatal)"/.test(l) ||
          (/WatchPosts/.test(l) && /"level":"warn"/.test(l)) ||
          /unhandled/i.test(l),
      );
      expect(bad, "no error logged for a client hanging up").to.deep.equal([]);
      const page = await api.get("/v1/posts?limit=1", { token: alice });
      expect(page.status, page.text).to.equal(200);
      const again = await openFeed(alice);
      const made = await createPost(`still-serving-${unique()}`);
      await again.waitFor(() => again.posts().some((p) => p.id === made.id), "a post on a new stream");
      await again.close();
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("catalog (public, offset pages)", () => {
    it("answers without a token: {items, page, page_size, total}; 5 demo items; pages of 2: 2, 2, 1, then 0", async () => {
      const all = await api.get("/v1/catalog/items");
      expect(all.status, all.text).to.equal(200);
      expect(Object.keys(all.json).sort()).to.deep.equal(CATALOG_PAGE_KEYS);
      expect(all.json).to.include({ page: 1, page_size: 20, total: 5 });
      expect(all.json.items.map((i: { sku: string }) => i.sku)).to.deep.equal(DEMO_SKUS);
      for (const item of all.json.items) expect(Object.keys(item).sort()).to.deep.equal(CATALOG_ITEM_KEYS);
      expect(all.json.items[0]).to.include({ sku: "BOOK-1", price: 1500, currency: "EUR" });

      const pages: unknown[] = [];
      for (const [page, size] of [
        [1, 2],
        [2, 2],
        [3, 2],
        [4, 2],
      ] as const) {
        const res = await api.get(`/v1/catalog/items?page=${page}&page_size=${size}`);
        expect(res.status, res.text).to.equal(200);
        expect(res.json).to.include({ page, page_size: size, total: 5 });
        expect(res.json.items.length, `page ${page}`).to.equal([2, 2, 1, 0][page - 1]);
        pages.push(...res.json.items);
      }
      expect(pages, "the pages together are the whole catalog").to.deep.equal(all.json.items);
      const far = await api.get("/v1/catalog/items?page=1000000&page_size=100");
      expect(far.status, far.text).to.equal(200);
      expect(far.json).to.deep.equal({ items: [], page: 1000000, page_size: 100, total: 5 });
    });

    it("refuses page=0, page_size=101 and page=abc (and friends) with 400 INVALID_REQUEST", async () => {
      for (const query of [
        "page=0",
        "page_size=101",
        "page=abc",
        "page_size=0",
        "page=-1",
        "page=1.5",
        "page=1000001",
        "page=1&page=2",
        "page_size=1e1",
      ]) {
        expectError(await api.get(`/v1/catalog/items?${query}`), 400, "INVALID_REQUEST");
      }
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("ImportItems over gRPC from connect-node (a client other than the serving library)", () => {
    let content: Client<typeof ContentService>;
    before(() => {
      const baseUrl = `http://127.0.0.1:${env.mesh.ports.content}`;
      grpcSessions = new Http2SessionManager(baseUrl);
      content = createClient(ContentService, createGrpcTransport({ baseUrl, sessionManager: grpcSessions }));
    });

    async function* itemsOf(items: { sku: string; name: string; price: bigint; currency: string }[]) {
      for (const item of items) yield { item };
    }

    it("streams 4 items → {created: 2, updated: 1, rejected: [index 3]}; the public catalog shows the new items and price", async () => {
      const run = unique().toUpperCase();
      const items = [
        { sku: `IMP-${run}-A`, name: "Imported lamp", price: 4200n, currency: "EUR" },
        { sku: `IMP-${run}-B`, name: "Imported chair", price: 12900n, currency: "EUR" },
        { sku: "BOOK-1", name: "The Pragmatic Switchyard", price: 1700n, currency: "EUR" },
        { sku: `IMP-${run}-BAD`, name: "Negative", price: -5n, currency: "EUR" },
      ];
      const summary = await content.importItems(itemsOf(items), { headers: bearer(alice), timeoutMs: 10_000 });
      expect(summary.created).to.equal(2);
      expect(summary.updated).to.equal(1);
      expect(summary.rejected.length).to.equal(1);
      const rejection = summary.rejected[0]!;
      expect(rejection.index).to.equal(3);
      expect(rejection.sku).to.equal(`IMP-${run}-BAD`);
      expect(rejection.reason).to.be.a("string").and.match(/price/);

      const catalog = await api.get("/v1/catalog/items?page_size=100");
      expect(catalog.status, catalog.text).to.equal(200);
      expect(catalog.json.total).to.equal(7);
      const bySku = new Map<string, Record<string, unknown>>(
        catalog.json.items.map((i: { sku: string }) => [i.sku, i]),
      );
      expect(bySku.get(`IMP-${run}-A`)).to.include({ name: "Imported lamp", price: 4200, currency: "EUR" });
      expect(bySku.get(`IMP-${run}-B`)).to.include({ name: "Imported chair", price: 12900, currency: "EUR" });
      expect(bySku.get("BOOK-1")).to.include({ name: "The Pragmatic Switchyard", price: 1700, currency: "EUR" });
      expect(bySku.has(`IMP-${run}-BAD`), "a rejected item is not stored").to.equal(false);
      expect(catalog.json.items.map((i: { sku: string }) => i.sku)).to.deep.equal([...bySku.keys()].sort());
    });

    it("refuses bob (a member of the catalog's tenant) with PERMISSION_DENIED / ROLE_REQUIRED, carol (an admin of another tenant) with PERMISSION_DENIED / TENANT_MISMATCH, and a call without a token with UNAUTHENTICATED; nothing is imported", async () => {
      const sku = `IMP-${unique().toUpperCase()}-NO`;
      const item = [{ sku, name: "Should not exist", price: 100n, currency: "EUR" }];
      // The catalog is written only by admins of the tenant that owns it (CATALOG_OWNER_TENANT, acme here).
      for (const [who, token, reason] of [
        ["bob", bob, "ROLE_REQUIRED"],
        ["carol", carol, "TENANT_MISMATCH"],
      ] as const) {
        const refused = await content.importItems(itemsOf(item), { headers: bearer(token), timeoutMs: 10_000 }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(refused, who).to.be.instanceOf(ConnectError);
        expect(Code[(refused as ConnectError).code], who).to.equal(Code[Code.PermissionDenied]);
        expect(errorInfoOf(refused as ConnectError)?.reason, `${who}'s ErrorInfo reason`).to.equal(reason);
      }
      const anonymous = await content.importItems(itemsOf(item), { timeoutMs: 10_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(anonymous).to.be.instanceOf(ConnectError);
      expect(Code[(anonymous as ConnectError).code]).to.equal(Code[Code.Unauthenticated]);
      const catalog = await api.get("/v1/catalog/items?page_size=100");
      expect(catalog.json.items.map((i: { sku: string }) => i.sku)).to.not.include(sku);
    });
  });

  // -------------------------------------------------------------------------------------------
  // Last: it stops the content process.
  describe("no leaked upstream streams", () => {
    it("after 5 live streams are opened and closed, the content service shuts down promptly (< 3 s, not its 10 s drain)", async function () {
      this.timeout(30_000);
      const streams = await Promise.all(Array.from({ length: 5 }, () => openFeed(alice)));
      // Each of them is really live upstream: one post reaches all five.
      const made = await createPost(`five-${unique()}`);
      for (const s of streams)
        await s.waitFor(() => s.posts().some((p) => p.id === made.id), "the post on every stream");
      await Promise.all(streams.map((s) => s.close()));
      await sleep(300);
      const started = Date.now();
      await env.mesh.stopService("content");
      const took = Date.now() - started;
      expect(took, `content took ${took} ms to stop`).to.be.lessThan(3_000);
      expect(env.mesh.logs.join(""), "no drain timeout").to.not.include("drain timeout");
    });
  });
});

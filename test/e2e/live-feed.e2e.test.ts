// The posts feed through the real processes: Server-Sent Events as curl sees them, resuming with
// Last-Event-ID, heartbeats, and hanging up releasing the upstream stream; and the ETag round trip.
import { expect } from "chai";
import { spawn } from "node:child_process";
import { request as httpRequest, type ClientRequest } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, Api, expectError, startE2eMesh, type E2eMesh } from "../support/http.js";

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** An open event stream, read frame by frame. */
function openStream(url: string, headers: Record<string, string>) {
  const frames: Frame[] = [];
  let status = 0;
  let buffer = "";
  let req: ClientRequest;
  const opened = new Promise<void>((resolve, reject) => {
    req = httpRequest(url, { headers: { accept: "text/event-stream", ...headers } }, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding("utf8").on("data", (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const frame: Frame = {};
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) frame.comment = line.slice(1).trim();
            else if (line.startsWith("id: ")) frame.id = line.slice(4);
            else if (line.startsWith("event: ")) frame.event = line.slice(7);
            else if (line.startsWith("data: ")) frame.data = line.slice(6);
          }
          frames.push(frame);
        }
      });
      resolve();
    });
    req.on("error", reject);
    req.end();
  });
  return {
    frames,
    get status() {
      return status;
    },
    opened,
    posts: () => frames.filter((f) => f.event === "post"),
    async waitFor(predicate: () => boolean, what: string) {
      for (let i = 0; i < 100 && !predicate(); i++) await sleep(50);
      expect(predicate(), what).to.equal(true);
    },
    close: () => req.destroy(),
  };
}

describe("e2e: the live posts feed and entity tags", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let api: Api;
  let token: string;
  const post = async (title: string) => {
    const res = await api.post("/v1/posts", { token, json: { title, body: "…" } });
    expect(res.status, res.text).to.equal(201);
    return res.json as { id: string };
  };

  before(async () => {
    env = await startE2eMesh("live-feed", { envFor: { gateway: { GATEWAY_SSE_HEARTBEAT_MS: "1000" } } });
    api = new Api(env.mesh.gatewayUrl);
    token = await api.login(ALICE);
  });
  after(async () => env?.stop());

  it("walks the ETag round trip: 200 → 304 → PUT 200 with a new tag → 412 on the stale tag, nothing stored", async () => {
    const created = await api.post("/v1/docs", { token, json: { title: "Runbook", body: "v1" } });
    expect(created.status).to.equal(201);
    const path = created.headers.get("location")!;
    const tag = created.headers.get("etag")!;
    expect(tag).to.match(/^"[^"]+"$/);
    const read = await api.get(path, { token });
    expect(read.headers.get("etag")).to.equal(tag);
    const notModified = await api.get(path, { token, headers: { "if-none-match": tag } });
    expect(notModified.status).to.equal(304);
    expect(notModified.text).to.equal("");
    const saved = await api.request("PUT", path, { token, headers: { "if-match": tag }, json: { title: "Runbook", body: "v2" } });
    expect(saved.status).to.equal(200);
    expect(saved.headers.get("etag")).to.not.equal(tag);
    expectError(await api.request("PUT", path, { token, headers: { "if-match": tag }, json: { title: "Runbook", body: "v3" } }), 412, "ETAG_MISMATCH");
    expect((await api.get(path, { token })).json.body).to.equal("v2");
  });

  it("streams new posts as events, beats while idle, and resumes with Last-Event-ID exactly where it stopped", async () => {
    const url = `${env.mesh.gatewayUrl}/v1/posts`;
    const first = openStream(url, { authorization: `Bearer ${token}` });
    await first.opened;
    expect(first.status).to.equal(200);
    await sleep(200);
    const made = [await post("one"), await post("two")];
    await first.waitFor(() => first.posts().length === 2, "two post events");
    expect(first.posts().map((f) => JSON.parse(f.data!).id)).to.deep.equal(made.map((m) => m.id));
    await first.waitFor(() => first.frames.some((f) => f.comment === "keep-alive"), "a heartbeat while idle");
    const lastSeen = first.posts()[1]!.id!;
    first.close();

    const missed = [await post("three"), await post("four")];
    const resumed = openStream(url, { authorization: `Bearer ${token}`, "last-event-id": lastSeen });
    await resumed.opened;
    await resumed.waitFor(() => resumed.posts().length === 2, "the two missed posts");
    const live = await post("five");
    await resumed.waitFor(() => resumed.posts().length === 3, "then the live one");
    expect(resumed.posts().map((f) => JSON.parse(f.data!).id)).to.deep.equal([...missed, live].map((m) => m.id));
    resumed.close();
  });

  it("shows posts to `curl -N` as they are made", async () => {
    const curl = spawn("curl", ["-sN", "-H", "Accept: text/event-stream", "-H", `Authorization: Bearer ${token}`, `${env.mesh.gatewayUrl}/v1/posts`]);
    let out = "";
    curl.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    try {
      await sleep(500);
      const made = await post("for curl");
      for (let i = 0; i < 100 && !out.includes(made.id); i++) await sleep(50);
      expect(out).to.match(/^retry: \d+/);
      expect(out).to.include("event: post");
      expect(out).to.include(made.id);
    } finally {
      curl.kill();
    }
  });

  it("answers a bad Last-Event-ID or a missing token with a plain JSON error, not a stream", async () => {
    expectError(await api.get("/v1/posts", { token, headers: { accept: "text/event-stream", "last-event-id": "garbage" } }), 400, "INVALID_CURSOR");
    const anonymous = await api.get("/v1/posts", { headers: { accept: "text/event-stream" } });
    expectError(anonymous, 401, "UNAUTHENTICATED");
  });

  it("releases the upstream stream when a client hangs up: content still stops at once", async () => {
    const streams = Array.from({ length: 5 }, () => openStream(`${env.mesh.gatewayUrl}/v1/posts`, { authorization: `Bearer ${token}` }));
    await Promise.all(streams.map((s) => s.opened));
    for (const s of streams) s.close();
    await sleep(300);
    const started = Date.now();
    // A stream still open would hold the service's graceful shutdown for its whole drain (10 s).
    await env.mesh.stopService("content");
    expect(Date.now() - started).to.be.lessThan(3_000);
    await env.mesh.restartService("content");
  });
});

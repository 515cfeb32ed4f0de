// Bounded live streams through the real mesh: a caller holds at most GATEWAY_MAX_STREAMS_PER_CALLER
// feeds (429 beyond, a slot back when one closes); a stream is shed under overload like any request;
// what asks for a stream is decided once (an Accept that only mentions it gets JSON, and is counted);
// a Last-Event-ID too far back is refused (409) instead of replaying the tenant's feed; and a reader
// that stops reading is disconnected once it is a bounded amount behind.
import { expect } from "chai";
import { request, type IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, BOB, expectError, startE2eMesh, type E2eMesh } from "../support/http.js";

const MAX_STREAMS = 3;
const REPLAY_LIMIT = 5;

describe("e2e: bounded live streams", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let alice: string;
  let bob: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("streams", {
      envFor: {
        gateway: {
          GATEWAY_MAX_STREAMS_PER_CALLER: String(MAX_STREAMS),
          GATEWAY_CONCURRENCY_INITIAL: "2",
          GATEWAY_CONCURRENCY_MIN: "2",
          GATEWAY_CONCURRENCY_MAX: "2",
        },
        content: { CONTENT_REPLAY_LIMIT: String(REPLAY_LIMIT) },
      },
    });
    [alice, bob] = await Promise.all([env.api.login(ALICE), env.api.login(BOB)]);
  });
  after(async function () {
    this.timeout(60_000);
    env?.mesh.process("payments")?.kill("SIGCONT");
    await env?.stop();
  });

  /** A live feed over a raw HTTP request: the response (to pause or read), and how to end it. */
  function feed(token: string, headers: Record<string, string> = {}): Promise<{ res: IncomingMessage; close(): void }> {
    const url = new URL(`${env.mesh.gatewayUrl}/v1/posts`);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          headers: { authorization: `Bearer ${token}`, accept: "text/event-stream", ...headers },
        },
        (res) => resolve({ res, close: () => req.destroy() }),
      );
      req.on("error", reject);
      req.end();
    });
  }

  const bodyOf = (res: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => (text += d));
      res.on("end", () => resolve(text));
      res.on("close", () => resolve(text));
      res.on("error", () => resolve(text));
    });

  it(`lets a caller hold ${MAX_STREAMS} feeds, answers one more with 429 TOO_MANY_STREAMS, and gives a slot back when one closes`, async () => {
    const open = [];
    for (let i = 0; i < MAX_STREAMS; i++) {
      const f = await feed(bob);
      expect(f.res.statusCode).to.equal(200);
      open.push(f);
    }
    const refused = await env.api.get("/v1/posts", { token: bob, headers: { accept: "text/event-stream" } });
    expectError(refused, 429, "TOO_MANY_STREAMS");
    expect(Number(refused.headers.get("retry-after"))).to.be.above(0);
    // Another caller, and the same caller's JSON pages, are not held back.
    const other = await feed(alice);
    expect(other.res.statusCode).to.equal(200);
    other.close();
    expect((await env.api.get("/v1/posts?limit=1", { token: bob })).status).to.equal(200);
    open.pop()!.close();
    let again = 0;
    for (const until = Date.now() + 5_000; again !== 200 && Date.now() < until; await sleep(50)) {
      const f = await feed(bob);
      again = f.res.statusCode ?? 0;
      if (again === 200) open.push(f);
      else f.res.resume();
    }
    expect(again, "a closed feed's slot is free again").to.equal(200);
    for (const f of open) f.close();
  });

  it("decides once whether a request asks for a stream: an Accept that only mentions it gets a JSON page", async () => {
    const res = await env.api.get("/v1/posts?limit=1", {
      token: bob,
      headers: { accept: "application/json; profile=text/event-stream" },
    });
    expect(res.status, res.text).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^application\/json/);
    expect(res.json).to.have.property("items");
  });

  it("sheds a stream like any request when the gateway is at its limit", async () => {
    const paymentId = (
      await env.api.post("/v1/payments", {
        token: alice,
        key: crypto.randomUUID(),
        json: { amount: 100, currency: "EUR", source: "tok_streams" },
      })
    ).json.id as string;
    env.mesh.process("payments").kill("SIGSTOP");
    try {
      const stuck = [
        env.api.get(`/v1/payments/${paymentId}`, { token: alice }),
        env.api.get(`/v1/payments/${paymentId}`, { token: alice }),
      ];
      await sleep(300);
      const shed = await env.api.get("/v1/posts", { token: alice, headers: { accept: "text/event-stream" } });
      expectError(shed, 503, "LOAD_SHED");
      env.mesh.process("payments").kill("SIGCONT");
      await Promise.all(stuck);
    } finally {
      env.mesh.process("payments").kill("SIGCONT");
    }
  });

  it(`refuses a Last-Event-ID more than ${REPLAY_LIMIT} posts back (409 REPLAY_TOO_LONG), and replays one within reach`, async () => {
    const made: { id: string }[] = [];
    for (let i = 0; i < REPLAY_LIMIT + 3; i++)
      made.push((await env.api.post("/v1/posts", { token: bob, json: { title: `replay ${i}`, body: "x" } })).json);
    const listed = (await env.api.get(`/v1/posts?limit=${REPLAY_LIMIT + 3}`, { token: bob })).json.items as {
      id: string;
    }[];
    expect(listed.map((p) => p.id)).to.deep.equal(made.map((p) => p.id).reverse());
    /** The position (the event id a stream gives it) of the n-th newest post: a page of n posts ends there. */
    const cursorOf = async (n: number) => {
      const cursor = (await env.api.get(`/v1/posts?limit=${n}`, { token: bob })).json.next_cursor as string | null;
      expect(cursor, `a page of ${n} has a next cursor`).to.be.a("string");
      return cursor!;
    };
    // REPLAY_LIMIT + 1 posts after that position: one too many to replay.
    const tooFar = await env.api.get("/v1/posts", {
      token: bob,
      headers: { accept: "text/event-stream", "last-event-id": await cursorOf(REPLAY_LIMIT + 2) },
    });
    expectError(tooFar, 409, "REPLAY_TOO_LONG");
    const near = await feed(bob, { "last-event-id": await cursorOf(3) });
    expect(near.res.statusCode).to.equal(200);
    const text = bodyOf(near.res);
    await sleep(500);
    near.close();
    const replayed = [...(await text).matchAll(/"title":"(replay \d+)"/g)].map((m) => m[1]);
    expect(replayed, "the two newest posts, oldest first").to.deep.equal([
      `replay ${REPLAY_LIMIT + 1}`,
      `replay ${REPLAY_LIMIT + 2}`,
    ]);
  });

  it("disconnects a reader that stops reading once it is a bounded amount behind, and goes on serving others", async function () {
    this.timeout(120_000);
    const slow = await feed(alice);
    slow.res.pause();
    const steady = await feed(bob);
    const steadyText = bodyOf(steady.res);
    const big = "x".repeat(60_000);
    // Far more than the sockets' buffers and the 1 MiB the gateway holds for one reader.
    const FLOOD = 400;
    for (let i = 0; i < FLOOD; i++)
      expect(
        (await env.api.post("/v1/posts", { token: bob, json: { title: `flood ${i}`, body: big } })).status,
      ).to.equal(201);
    // Reading again, the slow reader finds its stream ended by the gateway, well short of the flood.
    const slowText = bodyOf(slow.res);
    slow.res.resume();
    const text = await Promise.race([slowText, sleep(20_000).then(() => "(still open)")]);
    expect(text, "the gateway closed the stream of the reader that fell behind").to.not.equal("(still open)");
    const delivered = text.match(/"title":"flood \d+"/g)?.length ?? 0;
    expect(delivered, `it got ${delivered} of ${FLOOD} posts before it was cut off`).to.be.below(FLOOD);
    steady.close();
    expect(
      (await steadyText).match(/"title":"flood \d+"/g)?.length ?? 0,
      "the reader that kept up got every post",
    ).to.equal(FLOOD);
    expect((await env.api.get("/v1/posts?limit=1", { token: alice })).status).to.equal(200);
  });
});

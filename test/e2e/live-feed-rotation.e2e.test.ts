// The live posts feed across the upstream's routine interruptions, through the real mesh: content
// ends every client connection at its age (GRPC_MAX_CONNECTION_AGE_MS, set short here) and a replica
// restarts; an SSE subscriber sees none of it — every post exactly once, in order, no `event: error` —
// because the gateway reopens its upstream streams after the last event it delivered. Only an outage
// longer than GATEWAY_SSE_UPSTREAM_OUTAGE_MS ends the feed: in-band, with `retry:` and the last `id:`.
import { expect } from "chai";
import { request, type ClientRequest, type IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, BOB, startE2eMesh, unique, untilReachable, type E2eMesh } from "../support/http.js";

/** Content asks each connection to go after 1.5 s, and cuts what is still on it 0.3 s later. */
const CONNECTION_AGE_MS = 1_500;
const CONNECTION_AGE_GRACE_MS = 300;
/** Long enough for content's restart on a busy machine; the outage test waits it out once. */
const OUTAGE_MS = 8_000;
const HEARTBEAT_MS = 1_000;

interface Subscriber {
  events: { id: string; title: string }[];
  text: string;
  /** When the response ended (Date.now()), once it has. */
  endedAt: number | undefined;
  ended: Promise<void>;
  status: number;
  close(): void;
}

describe("e2e: the live feed outlives content's connection rotations, restarts and short outages", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let alice: string;
  let bob: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("feed-rotation", {
      envFor: {
        content: {
          GRPC_MAX_CONNECTION_AGE_MS: String(CONNECTION_AGE_MS),
          GRPC_MAX_CONNECTION_AGE_GRACE_MS: String(CONNECTION_AGE_GRACE_MS),
        },
        gateway: {
          GATEWAY_SSE_UPSTREAM_OUTAGE_MS: String(OUTAGE_MS),
          GATEWAY_SSE_HEARTBEAT_MS: String(HEARTBEAT_MS),
        },
      },
    });
    [alice, bob] = await Promise.all([env.api.login(ALICE), env.api.login(BOB)]);
  });
  /** What a test left running (it failed half-way): stopped before the next one. */
  const posters: { stop(): Promise<void> }[] = [];
  const feeds: Subscriber[] = [];
  afterEach(async function () {
    await Promise.all(posters.splice(0).map((p) => p.stop()));
    for (const f of feeds.splice(0)) f.close();
    // A failure says what the gateway made of its upstream streams.
    if (this.currentTest?.state === "failed")
      console.log(
        env.mesh
          .logsOf("gateway")
          .join("")
          .split("\n")
          .filter((line) => line.includes("live stream"))
          .slice(-20)
          .join("\n"),
      );
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  function subscribe(token: string, headers: Record<string, string> = {}): Promise<Subscriber> {
    const url = new URL(`${env.mesh.gatewayUrl}/v1/posts`);
    return new Promise((resolve, reject) => {
      let req: ClientRequest;
      const onResponse = (res: IncomingMessage) => {
        const sub: Subscriber = {
          events: [],
          text: "",
          endedAt: undefined,
          status: res.statusCode ?? 0,
          ended: undefined as never,
          close: () => req.destroy(),
        };
        feeds.push(sub);
        let pending = "";
        sub.ended = new Promise<void>((done) => {
          const end = () => {
            sub.endedAt ??= Date.now();
            done();
          };
          res.setEncoding("utf8").on("data", (chunk: string) => {
            sub.text += chunk;
            pending += chunk;
            let at: number;
            while ((at = pending.indexOf("\n\n")) !== -1) {
              const block = pending.slice(0, at);
              pending = pending.slice(at + 2);
              const id = /^id: (.*)$/m.exec(block)?.[1];
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (id && /^event: post$/m.test(block))
                sub.events.push({ id, title: (JSON.parse(data!) as { title: string }).title });
            }
          });
          res.on("close", end);
          res.on("error", end);
        });
        resolve(sub);
      };
      req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          headers: { authorization: `Bearer ${token}`, accept: "text/event-stream", ...headers },
        },
        onResponse,
      );
      req.on("error", reject);
      req.end();
    });
  }

  /** Waits until `check` holds; fails at once if one of `open` ended meanwhile (saying how). */
  async function until(
    what: string,
    check: () => Promise<boolean> | boolean,
    open: Subscriber[] = [],
    ms = 30_000,
  ): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      const ended = open.find((s) => s.endedAt !== undefined);
      if (ended) throw new Error(`a feed ended while waiting until ${what}:\n${ended.text.slice(-400)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(50);
    }
  }

  /** The gateway's count of upstream live streams it reopened, by which stream. */
  async function resubscriptions(stream: "shared" | "catch_up"): Promise<number> {
    const text = await (await fetch(`${env.mesh.gatewayUrl}/metrics`)).text();
    const m = new RegExp(
      `^switchyard_gateway_live_resubscriptions_total\\{[^}]*stream="${stream}"[^}]*\\} (\\S+)$`,
      "m",
    ).exec(text);
    return m ? Number(m[1]) : 0;
  }

  /**
   * Posts one after another (titles `<prefix>-<n>`) until stopped. A post that fails (content restarting)
   * is not counted; whether it was stored anyway is for the feed to say, so the truth is the list.
   */
  function keepPosting(token: string, prefix: string) {
    let stop = false;
    let made = 0;
    let failed = 0;
    const done = (async () => {
      for (let n = 0; !stop; n++) {
        const res = await env.api
          .post("/v1/posts", { token, json: { title: `${prefix}-${n}`, body: "rotation" } })
          .catch(() => undefined);
        if (res?.status === 201) made++;
        else {
          failed++;
          await sleep(100); // content is away: no tight loop
        }
        await sleep(20);
      }
    })();
    const poster = {
      made: () => made,
      failed: () => failed,
      async stop() {
        stop = true;
        await done;
      },
    };
    posters.push(poster);
    return poster;
  }

  /** Every post of the feed whose title starts with `prefix`, oldest first (the keyset pages, newest first, reversed). */
  async function feedTitles(token: string, prefix: string): Promise<string[]> {
    const all: string[] = [];
    let path: string | undefined = "/v1/posts?limit=100";
    while (path) {
      const res = await env.api.get(path, { token });
      expect(res.status, res.text).to.equal(200);
      const body = res.json as { items: { title: string }[]; next_cursor: string | null };
      for (const item of body.items) if (item.title.startsWith(prefix)) all.push(item.title);
      path = body.next_cursor ? `/v1/posts?limit=100&cursor=${encodeURIComponent(body.next_cursor)}` : undefined;
      if (body.items.length > 0 && !body.items.some((i) => i.title.startsWith(prefix))) break; // older than the test
    }
    return all.reverse();
  }

  /** Every post made under `prefix` reached the subscriber once, in order, and its feed never said error. */
  async function expectWholeFeed(subs: Subscriber[], token: string, prefix: string): Promise<void> {
    const expected = await feedTitles(token, prefix);
    expect(expected.length).to.be.greaterThan(0);
    await until(
      "every subscriber got every post",
      () => subs.every((s) => s.events.filter((e) => e.title.startsWith(prefix)).length >= expected.length),
      subs,
    );
    await sleep(300); // nothing more arrives (no duplicate)
    for (const s of subs) {
      expect(s.text, "no error frame").to.not.match(/^event: error$/m);
      expect(s.endedAt, "the feed is still open").to.equal(undefined);
      const got = s.events.filter((e) => e.title.startsWith(prefix)).map((e) => e.title);
      expect(got, "each post once, in the feed's order").to.deep.equal(expected);
      expect(new Set(s.events.map((e) => e.id)).size, "no id twice").to.equal(s.events.length);
    }
  }

  it("a subscriber stays connected over several connection rotations and gets every post made meanwhile, once, in order, with no error", async () => {
    const prefix = `rot-${unique()}`;
    const subs = [await subscribe(alice), await subscribe(bob)];
    for (const s of subs) expect(s.status).to.equal(200);
    const before = await resubscriptions("shared");
    const poster = keepPosting(alice, prefix);
    // Wait on what happened, not on time: three rotations of the shared stream while posts kept coming.
    await until(
      "the shared stream was reopened three times",
      async () => (await resubscriptions("shared")) >= before + 3,
      subs,
    );
    await poster.stop();
    expect(poster.made(), "posts were made throughout").to.be.greaterThan(10);
    await expectWholeFeed(subs, alice, prefix);
    // A rotation is routine: logged below warn.
    expect(env.mesh.logsOf("gateway").join("")).to.not.match(/"level":"(warn|error)"[^\n]*live (stream|feed)/);
    for (const s of subs) s.close();
  });

  it("content restarted mid-feed: the subscribers see every post once, in order, and no error", async () => {
    const prefix = `restart-${unique()}`;
    const subs = [await subscribe(alice), await subscribe(bob)];
    const poster = keepPosting(alice, prefix);
    await until("posts arrive", () => subs.every((s) => s.events.length >= 3), subs);
    const before = await resubscriptions("shared");
    await env.mesh.restartService("content");
    const made = poster.made();
    await until("posts are made again after the restart", () => poster.made() >= made + 5, subs);
    await poster.stop();
    await expectWholeFeed(subs, alice, prefix);
    expect(await resubscriptions("shared"), "the shared stream was reopened").to.be.greaterThan(before);
    for (const s of subs) s.close();
  });

  it(`content away for longer than GATEWAY_SSE_UPSTREAM_OUTAGE_MS (${OUTAGE_MS} ms): heartbeats meanwhile, then the feed ends in-band with retry: and the last id, and resuming from it misses nothing`, async () => {
    const prefix = `outage-${unique()}`;
    const sub = await subscribe(alice);
    for (let n = 0; n < 3; n++) {
      const res = await env.api.post("/v1/posts", { token: alice, json: { title: `${prefix}-${n}`, body: "outage" } });
      expect(res.status, res.text).to.equal(201);
    }
    await until("the posts arrived", () => sub.events.length === 3, [sub]);
    const lastId = sub.events[2]!.id;
    const stoppedAt = Date.now();
    await env.mesh.stopService("content", "SIGKILL");
    const heard = sub.text.length;
    await Promise.race([
      sub.ended,
      sleep(OUTAGE_MS + 15_000).then(() => Promise.reject(new Error("the feed did not end after the bound"))),
    ]);
    expect(sub.endedAt! - stoppedAt, "the feed rode the outage out up to the bound").to.be.at.least(OUTAGE_MS);
    const meanwhile = sub.text.slice(heard);
    expect(meanwhile, "heartbeats kept the connection alive during the outage").to.match(/^: keep-alive$/m);
    const frames = meanwhile.split("\n\n").filter((f) => /^event: error$/m.test(f));
    expect(frames, "one error frame").to.have.length(1);
    expect(frames[0]).to.include(`id: ${lastId}\n`);
    expect(frames[0]).to.match(/^retry: \d+$/m);
    expect(frames[0]).to.include(
      'data: {"error":"the live feed was interrupted; reconnect","code":"UPSTREAM_UNAVAILABLE"}',
    );

    await env.mesh.restartService("content");
    await untilReachable(() => env.api.get("/v1/posts?limit=1", { token: alice }));
    const missed = await env.api.post("/v1/posts", { token: alice, json: { title: `${prefix}-3`, body: "outage" } });
    expect(missed.status, missed.text).to.equal(201);
    const back = await subscribe(alice, { "last-event-id": lastId });
    expect(back.status).to.equal(200);
    await until("the resumed feed got what was made meanwhile", () => back.events.length === 1);
    expect(back.events.map((e) => e.title)).to.deep.equal([`${prefix}-3`]);
    back.close();
  });
});

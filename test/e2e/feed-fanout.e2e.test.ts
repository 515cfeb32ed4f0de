// The live posts feed shared at the gateway, through the real mesh: however many subscribers a
// tenant has on one gateway, content serves that gateway one WatchPosts stream for the tenant (each
// subscriber's own stream lasts only its catch-up); every post reaches every subscriber once, in
// order; a subscriber resuming with Last-Event-ID gets what it missed and then the shared tail; tenants
// stay apart; content killed for longer than the gateway rides out ends every stream in-band, and
// reconnecting catches up. (Shorter interruptions, unseen by subscribers: live-feed-rotation.e2e.test.ts.)
import { expect } from "chai";
import { request, type ClientRequest, type IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, BOB, CAROL, startE2eMesh, type E2eMesh } from "../support/http.js";

const SUBSCRIBERS = 24;
/** How long the gateway rides out content being away before the feeds end (its default is 30 s). */
const OUTAGE_MS = 1_000;

/** One SSE subscriber: the events it got (id and title), whether it ended, and the text it ended with. */
interface Subscriber {
  events: { id: string; title: string }[];
  text: string;
  ended: Promise<void>;
  status: number;
  close(): void;
}

describe("e2e: the live feed shared per tenant at the gateway", function () {
  this.timeout(90_000);
  let env: E2eMesh;
  let alice: string;
  let bob: string;
  let carol: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("fanout", {
      envFor: {
        gateway: {
          GATEWAY_MAX_STREAMS_PER_CALLER: String(SUBSCRIBERS),
          GATEWAY_SSE_UPSTREAM_OUTAGE_MS: String(OUTAGE_MS),
        },
      },
      metrics: true,
    });
    [alice, bob, carol] = await Promise.all([env.api.login(ALICE), env.api.login(BOB), env.api.login(CAROL)]);
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
          status: res.statusCode ?? 0,
          ended: undefined as never,
          close: () => req.destroy(),
        };
        let pending = "";
        sub.ended = new Promise<void>((done) => {
          res.setEncoding("utf8").on("data", (chunk: string) => {
            sub.text += chunk;
            pending += chunk;
            let end: number;
            while ((end = pending.indexOf("\n\n")) !== -1) {
              const block = pending.slice(0, end);
              pending = pending.slice(end + 2);
              const id = /^id: (.*)$/m.exec(block)?.[1];
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (id && /^event: post$/m.test(block))
                sub.events.push({ id, title: (JSON.parse(data!) as { title: string }).title });
            }
          });
          res.on("close", () => done());
          res.on("error", () => done());
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

  async function post(token: string, title: string): Promise<void> {
    const res = await env.api.post("/v1/posts", { token, json: { title, body: "fan-out" } });
    expect(res.status, res.text).to.equal(201);
  }

  /** A metric's value; with `method`, its series for that gRPC method. */
  async function scrape(url: string, name: string, method?: string): Promise<number> {
    const text = await (await fetch(url)).text();
    const labels = method === undefined ? "(?:\\{[^}]*\\})?" : `\\{[^}]*rpc_method="${method}"[^}]*\\}`;
    const m = new RegExp(`^${name}${labels} (\\S+)$`, "m").exec(text);
    expect(m, `${name} in ${url}`).to.not.equal(null);
    return Number(m![1]);
  }
  const contentMetrics = () => `http://127.0.0.1:${env.mesh.metricsPorts.content[0]}/metrics`;
  const gatewayMetrics = () => `${env.mesh.gatewayUrl}/metrics`;

  async function until(what: string, check: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(50);
    }
  }

  it(`serves ${SUBSCRIBERS} subscribers of one tenant with one upstream stream, and every post reaches each of them once, in order; the other tenant sees none`, async () => {
    const subs = await Promise.all(Array.from({ length: SUBSCRIBERS }, (_, i) => subscribe(i % 2 ? alice : bob)));
    const other = await subscribe(carol);
    for (const s of [...subs, other]) expect(s.status).to.equal(200);
    // Each subscriber's own (catch-up) stream is closed once it has caught up: one stream per tenant stays.
    await until(
      "content holds one stream per tenant",
      async () => (await scrape(contentMetrics(), "switchyard_rpc_server_open_streams", "WatchPosts")) === 2,
    );
    expect(await scrape(gatewayMetrics(), "switchyard_gateway_shared_live_streams")).to.equal(2);
    expect(await scrape(gatewayMetrics(), "switchyard_gateway_live_streams")).to.equal(SUBSCRIBERS + 1);

    const titles = Array.from({ length: 8 }, (_, i) => `fanout-${i}`);
    for (const title of titles) await post(alice, title);
    await until("every subscriber got every post", () => subs.every((s) => s.events.length >= titles.length));
    await sleep(200); // nothing more arrives (no duplicates)
    for (const s of subs) expect(s.events.map((e) => e.title)).to.deep.equal(titles);
    expect(new Set(subs.map((s) => s.events.map((e) => e.id).join())).size, "the same ids for all").to.equal(1);
    expect(other.events, "globex's subscriber sees none of acme's posts").to.deep.equal([]);

    for (const s of [...subs, other]) s.close();
    await until(
      "the shared streams close with their last subscriber",
      async () => (await scrape(gatewayMetrics(), "switchyard_gateway_shared_live_streams")) === 0,
    );
    await until(
      "content holds no stream",
      async () => (await scrape(contentMetrics(), "switchyard_rpc_server_open_streams", "WatchPosts")) === 0,
    );
    // Each live stream is counted as one when it closes, apart from the latencies (it lasted the whole test).
    await until(
      "every stream is counted",
      async () => (await scrape(gatewayMetrics(), "switchyard_gateway_streams_opened_total")) === SUBSCRIBERS + 1,
    );
    const counts = (await (await fetch(gatewayMetrics())).text())
      .split("\n")
      .filter(
        (l) => l.startsWith("switchyard_http_request_duration_seconds_count{") && l.includes('route="/v1/posts"'),
      );
    expect(
      counts.filter((l) => l.includes('method="GET"')),
      "no live stream in the latency histogram",
    ).to.deep.equal([]);
    expect(
      counts.filter((l) => l.includes('method="POST"') && l.endsWith(" 8")),
      "the posts made are in it",
    ).to.have.length(1);
  });

  it("a subscriber resuming with Last-Event-ID beside live ones gets what it missed, then the shared tail — each post once", async () => {
    const live = await subscribe(alice);
    await post(alice, "resume-1");
    await until("the live subscriber got resume-1", () => live.events.length === 1);
    const seen = live.events[0]!.id;
    await post(alice, "resume-2");
    await post(alice, "resume-3");
    const resumed = await subscribe(bob, { "last-event-id": seen });
    expect(resumed.status).to.equal(200);
    await until("the resumed subscriber caught up", () => resumed.events.length >= 2);
    await post(alice, "resume-4");
    await until("both got resume-4", () => live.events.length === 4 && resumed.events.length >= 3);
    await sleep(200);
    expect(resumed.events.map((e) => e.title)).to.deep.equal(["resume-2", "resume-3", "resume-4"]);
    expect(live.events.map((e) => e.title)).to.deep.equal(["resume-1", "resume-2", "resume-3", "resume-4"]);
    live.close();
    resumed.close();
  });

  it(`content killed mid-feed and away for longer than GATEWAY_SSE_UPSTREAM_OUTAGE_MS (${OUTAGE_MS} ms): every subscriber's stream ends in-band with its last id (no hang); once content is back, reconnecting with Last-Event-ID catches up`, async function () {
    this.timeout(60_000);
    const subs = await Promise.all(Array.from({ length: 6 }, () => subscribe(alice)));
    await post(alice, "before-kill");
    await until("every subscriber got before-kill", () => subs.every((s) => s.events.length === 1));
    await env.mesh.stopService("content", "SIGKILL");
    await Promise.race([
      Promise.all(subs.map((s) => s.ended)),
      sleep(10_000).then(() => Promise.reject(new Error("a stream did not end after content died"))),
    ]);
    for (const s of subs)
      expect(s.text).to.include(
        `id: ${s.events[0]!.id}\nretry: 2000\nevent: error\ndata: {"error":"the live feed was interrupted; reconnect","code":"UPSTREAM_UNAVAILABLE"}`,
      );
    await env.mesh.restartService("content");
    await post(alice, "while-away");
    const back = await Promise.all(subs.map((s) => subscribe(alice, { "last-event-id": s.events[0]!.id })));
    await until("the reconnected got while-away", () => back.every((s) => s.events.length === 1));
    await post(alice, "after-return");
    await until("the reconnected got after-return", () => back.every((s) => s.events.length === 2));
    await sleep(200);
    for (const s of back) expect(s.events.map((e) => e.title)).to.deep.equal(["while-away", "after-return"]);
    for (const s of back) s.close();
  });
});

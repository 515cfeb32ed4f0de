// The gateway's shared live streams (runtime/live-fanout.ts) against a simulated upstream whose
// streams the test feeds and ends: one upstream per key however many subscribe, a catch-up without
// gaps or duplicates, another subscriber's token when the upstream refuses one, and clean endings.
// The real thing through the mesh: test/e2e/feed-fanout.e2e.test.ts.
import { expect } from "chai";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { LiveFanout, type LiveEvent, type OpenShared } from "../src/runtime/live-fanout.js";

interface Opened {
  position: string;
  authorization: string | undefined;
  signal: AbortSignal;
  events: AsyncQueue<LiveEvent>;
}

/** An upstream that records every stream opened and lets the test push into it, refuse it or end it. */
function simulatedUpstream(refuse: (authorization: string | undefined) => boolean = () => false) {
  const opened: Opened[] = [];
  const open: OpenShared = async (position, headers, signal) => {
    if (refuse(headers.authorization)) throw fail("UNAUTHENTICATED", "the token has expired");
    const events = new AsyncQueue<LiveEvent>();
    signal.addEventListener("abort", () => events.close(), { once: true });
    opened.push({ position, authorization: headers.authorization, signal, events });
    return events;
  };
  return { opened, open };
}

const event = (n: number): LiveEvent => ({ id: `c${n}`, event: "post", data: { n } });
const credential = (token: string, expiresInSeconds = 600) => ({ headers: { authorization: `Bearer ${token}` }, expiresAt: Date.now() / 1000 + expiresInSeconds });
const tick = () => new Promise((r) => setImmediate(r));

/** Reads `count` events from a subscription's iterator. */
async function take(iterator: AsyncIterator<LiveEvent>, count: number): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < count) {
    const r = await iterator.next();
    if (r.done) break;
    ids.push(r.value.id);
  }
  return ids;
}

describe("gateway: shared live streams (fan-out)", () => {
  const logger = createLogger("gateway-test", "silent");

  it("opens one upstream stream per key however many subscribe, and hands every subscriber the same event object (framed once)", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const subs = await Promise.all([1, 2, 3].map((i) => fanout.join("posts/acme", credential(`acme-${i}`), upstream.open)));
    const other = await fanout.join("posts/globex", credential("globex"), upstream.open);
    expect(upstream.opened.map((o) => o.position)).to.deep.equal(["", ""]);
    expect(fanout.size).to.equal(2);
    for (const s of [...subs, other]) s.goLive(new Set());
    const shared = event(1);
    upstream.opened[0]!.events.push(shared);
    const received = await Promise.all(subs.map((s) => s.events[Symbol.asyncIterator]().next()));
    for (const r of received) expect(r.value, "the very same object").to.equal(shared);
    upstream.opened[1]!.events.push(event(9));
    expect(await take(other.events[Symbol.asyncIterator](), 1)).to.deep.equal(["c9"]);
    for (const s of [...subs, other]) s.leave();
  });

  it("holds what arrives while a subscriber catches up, then passes it on less what its own stream already sent, in order", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const sub = await fanout.join("posts/acme", credential("a"), upstream.open);
    for (const n of [4, 5, 6, 7]) upstream.opened[0]!.events.push(event(n));
    await tick();
    // Its own stream replayed up to c5 (c4 and c5 were made during the replay, so both streams have them).
    sub.goLive(new Set(["c3", "c4", "c5"]));
    upstream.opened[0]!.events.push(event(8));
    expect(await take(sub.events[Symbol.asyncIterator](), 3)).to.deep.equal(["c6", "c7", "c8"]);
    sub.leave();
  });

  it("when the upstream refuses the token it was opened with, reopens after the last event with the subscriber token that stays good longest — nothing is lost", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const first = await fanout.join("posts/acme", credential("short", 60), upstream.open);
    const second = await fanout.join("posts/acme", credential("long", 3_600), upstream.open);
    const third = await fanout.join("posts/acme", credential("middle", 600), upstream.open);
    for (const s of [first, second, third]) s.goLive(new Set());
    expect(upstream.opened[0]!.authorization, "the first subscriber opens it").to.equal("Bearer short");
    upstream.opened[0]!.events.push(event(1));
    upstream.opened[0]!.events.fail(fail("UNAUTHENTICATED", "the token was revoked"));
    await tick();
    await tick();
    expect(upstream.opened.length).to.equal(2);
    expect([upstream.opened[1]!.position, upstream.opened[1]!.authorization]).to.deep.equal(["c1", "Bearer long"]);
    upstream.opened[1]!.events.push(event(2));
    for (const s of [first, second, third]) expect(await take(s.events[Symbol.asyncIterator](), 2)).to.deep.equal(["c1", "c2"]);
    for (const s of [first, second, third]) s.leave();
  });

  it("refuses a join when no subscriber's token is good upstream, and keeps no stream for the key", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream(() => true);
    let refused: unknown;
    await fanout.join("posts/acme", credential("revoked"), upstream.open).catch((err: unknown) => (refused = err));
    expect(String(refused)).to.match(/no subscriber of the live feed holds a token that is still good/);
    expect(fanout.size).to.equal(0);
  });

  it("closes the upstream stream when its last subscriber leaves; the next subscriber opens a new one", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const a = await fanout.join("posts/acme", credential("a"), upstream.open);
    const b = await fanout.join("posts/acme", credential("b"), upstream.open);
    a.leave();
    a.leave(); // twice is once
    expect(upstream.opened[0]!.signal.aborted, "b still follows it").to.equal(false);
    b.leave();
    expect(upstream.opened[0]!.signal.aborted).to.equal(true);
    expect(fanout.size).to.equal(0);
    const c = await fanout.join("posts/acme", credential("c"), upstream.open);
    expect(upstream.opened.length).to.equal(2);
    c.leave();
  });

  it("ends every subscriber with the error when the upstream fails otherwise (they reconnect with their last event id), and frees the key", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const subs = await Promise.all(["a", "b"].map((t) => fanout.join("posts/acme", credential(t), upstream.open)));
    for (const s of subs) s.goLive(new Set());
    upstream.opened[0]!.events.fail(fail("UPSTREAM_UNAVAILABLE", "content went away"));
    for (const s of subs) {
      let ended: unknown;
      await s.events[Symbol.asyncIterator]().next().catch((err: unknown) => (ended = err));
      expect(String(ended)).to.match(/content went away/);
    }
    expect(fanout.size).to.equal(0);
    const again = await fanout.join("posts/acme", credential("a"), upstream.open);
    expect(upstream.opened.length).to.equal(2);
    again.leave();
  });

  it("ends only the subscriber that falls more than its bound behind; the others go on", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const slow = await fanout.join("posts/acme", credential("slow"), upstream.open);
    const fast = await fanout.join("posts/acme", credential("fast"), upstream.open);
    slow.goLive(new Set());
    fast.goLive(new Set());
    const fastReader = fast.events[Symbol.asyncIterator]();
    const big = (n: number): LiveEvent => ({ ...event(n), frame: Buffer.alloc(100 * 1024) });
    for (let n = 1; n <= 12; n++) {
      upstream.opened[0]!.events.push(big(n));
      await tick();
      expect((await fastReader.next()).value?.id).to.equal(`c${n}`);
    }
    let ended: unknown;
    await slow.events[Symbol.asyncIterator]().next().catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/fell too far behind/);
    expect(upstream.opened[0]!.signal.aborted, "the shared stream goes on").to.equal(false);
    slow.leave();
    fast.leave();
  });
});

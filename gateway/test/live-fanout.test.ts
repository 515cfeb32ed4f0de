// The gateway's shared live streams (runtime/live-fanout.ts) against a simulated upstream whose
// streams the test feeds and ends: one upstream per key however many subscribe, a catch-up without
// gaps or duplicates, another subscriber's token when the upstream refuses one, and clean endings.
// The real thing through the mesh: test/e2e/feed-fanout.e2e.test.ts.
import { expect } from "chai";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { LiveFanout, type LiveEvent, type LiveSubscription, type OpenShared } from "../src/runtime/live-fanout.js";

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
const credential = (token: string, expiresInSeconds = 600) => ({
  headers: { authorization: `Bearer ${token}` },
  expiresAt: Date.now() / 1000 + expiresInSeconds,
});
const tick = () => new Promise((r) => setImmediate(r));

/** Follows a subscription, collecting what its writer is given; `keep` false makes the writer say it is done. */
function follow(sub: LiveSubscription, sent: ReadonlySet<string> = new Set()) {
  const f = {
    events: [] as LiveEvent[],
    keep: true,
    ended: undefined as unknown as Promise<void>,
    ids: () => f.events.map((e) => e.id),
  };
  f.ended = sub.follow(sent, (event) => {
    f.events.push(event);
    return f.keep;
  });
  f.ended.catch(() => undefined);
  return f;
}

describe("gateway: shared live streams (fan-out)", () => {
  const logger = createLogger("gateway-test", "silent");

  it("opens one upstream stream per key however many subscribe, and hands every subscriber the same event object (framed once)", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const subs = await Promise.all(
      [1, 2, 3].map((i) => fanout.join("posts/acme", credential(`acme-${i}`), upstream.open)),
    );
    const other = await fanout.join("posts/globex", credential("globex"), upstream.open);
    expect(upstream.opened.map((o) => o.position)).to.deep.equal(["", ""]);
    expect(fanout.size).to.equal(2);
    const followers = subs.map((s) => follow(s));
    const otherFollower = follow(other);
    const shared = event(1);
    upstream.opened[0]!.events.push(shared);
    upstream.opened[1]!.events.push(event(9));
    await tick();
    for (const f of followers)
      expect(f.events, "the very same object")
        .to.deep.equal([shared])
        .and.satisfy((e: LiveEvent[]) => e[0] === shared);
    expect(otherFollower.ids()).to.deep.equal(["c9"]);
    for (const s of [...subs, other]) s.leave();
    for (const f of [...followers, otherFollower]) await f.ended; // leaving ends a follow normally
  });

  it("holds what arrives while a subscriber catches up, then passes it on less what its own stream already sent, in order", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const sub = await fanout.join("posts/acme", credential("a"), upstream.open);
    for (const n of [4, 5, 6, 7]) upstream.opened[0]!.events.push(event(n));
    await tick();
    // Its own stream replayed up to c5 (c4 and c5 were made during the replay, so both streams have them).
    const f = follow(sub, new Set(["c3", "c4", "c5"]));
    expect(f.ids(), "what was held, at once").to.deep.equal(["c6", "c7"]);
    upstream.opened[0]!.events.push(event(8));
    await tick();
    expect(f.ids()).to.deep.equal(["c6", "c7", "c8"]);
    sub.leave();
  });

  it("when the upstream refuses the token it was opened with, reopens after the last event with the subscriber token that stays good longest — nothing is lost", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const first = await fanout.join("posts/acme", credential("short", 60), upstream.open);
    const second = await fanout.join("posts/acme", credential("long", 3_600), upstream.open);
    const third = await fanout.join("posts/acme", credential("middle", 600), upstream.open);
    const followers = [first, second, third].map((s) => follow(s));
    expect(upstream.opened[0]!.authorization, "the first subscriber opens it").to.equal("Bearer short");
    upstream.opened[0]!.events.push(event(1));
    upstream.opened[0]!.events.fail(fail("UNAUTHENTICATED", "the token was revoked"));
    await tick();
    await tick();
    expect(upstream.opened.length).to.equal(2);
    expect([upstream.opened[1]!.position, upstream.opened[1]!.authorization]).to.deep.equal(["c1", "Bearer long"]);
    upstream.opened[1]!.events.push(event(2));
    await tick();
    for (const f of followers) expect(f.ids()).to.deep.equal(["c1", "c2"]);
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

  it("tells a subscriber whose own token ran out that it expired, when the upstream ends the stream before the edge's watch of that token does", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    // Expires in 50 ms: the upstream refuses it once that has passed, as content does at its expiry.
    const sub = await fanout.join("posts/acme", credential("short", 0.05), upstream.open);
    const f = follow(sub);
    await new Promise((r) => setTimeout(r, 80));
    upstream.opened[0]!.events.fail(fail("UNAUTHENTICATED", "the token has expired"));
    let ended: unknown;
    await f.ended.catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/the token has expired/);
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
    const followers = subs.map((s) => follow(s));
    upstream.opened[0]!.events.fail(fail("UPSTREAM_UNAVAILABLE", "content went away"));
    for (const f of followers) {
      let ended: unknown;
      await f.ended.catch((err: unknown) => (ended = err));
      expect(String(ended)).to.match(/content went away/);
    }
    expect(fanout.size).to.equal(0);
    const again = await fanout.join("posts/acme", credential("a"), upstream.open);
    expect(upstream.opened.length).to.equal(2);
    again.leave();
  });

  it("ends every feed of every key with the error when the gateway stops (endAll), closing each upstream stream", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const subs = await Promise.all(
      [
        ["posts/acme", "a"],
        ["posts/acme", "b"],
        ["posts/globex", "c"],
      ].map(([key, t]) => fanout.join(key!, credential(t!), upstream.open)),
    );
    const followers = subs.map((s) => follow(s));
    fanout.endAll(fail("UPSTREAM_UNAVAILABLE", "the gateway is shutting down; reconnect"));
    for (const f of followers) {
      let ended: unknown;
      await f.ended.catch((err: unknown) => (ended = err));
      expect(String(ended)).to.match(/shutting down/);
    }
    expect(
      upstream.opened.every((o) => o.signal.aborted),
      "every upstream stream closed",
    ).to.equal(true);
    expect(fanout.size).to.equal(0);
  });

  it("ends a subscriber that holds more than its bound while it catches up, and one whose writer says it is done; the others go on", async () => {
    const fanout = new LiveFanout(logger);
    const upstream = simulatedUpstream();
    const slow = await fanout.join("posts/acme", credential("slow"), upstream.open); // never catches up
    const done = await fanout.join("posts/acme", credential("done"), upstream.open);
    const fast = await fanout.join("posts/acme", credential("fast"), upstream.open);
    const doneFollower = follow(done);
    const fastFollower = follow(fast);
    const big = (n: number): LiveEvent => ({ ...event(n), frame: Buffer.alloc(100 * 1024) });
    upstream.opened[0]!.events.push(big(1));
    await tick();
    doneFollower.keep = false; // its client went away, or fell behind and was disconnected
    for (let n = 2; n <= 12; n++) upstream.opened[0]!.events.push(big(n));
    await tick();
    await doneFollower.ended;
    expect(doneFollower.ids(), "nothing after it said it was done").to.deep.equal(["c1", "c2"]);
    let ended: unknown;
    await slow.follow(new Set(), () => true).catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/fell too far behind/);
    expect(fastFollower.events.length).to.equal(12);
    expect(upstream.opened[0]!.signal.aborted, "the shared stream goes on").to.equal(false);
    for (const s of [slow, done, fast]) s.leave();
    expect(upstream.opened[0]!.signal.aborted).to.equal(true);
  });
});

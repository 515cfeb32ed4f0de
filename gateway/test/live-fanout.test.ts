// The gateway's shared live streams (runtime/live-fanout.ts) against a simulated upstream whose
// streams the test feeds and ends: one upstream per key however many subscribe, a catch-up without
// gaps or duplicates, another subscriber's token when the upstream refuses one, and clean endings.
// The real thing through the mesh: test/e2e/feed-fanout.e2e.test.ts.
import { expect } from "chai";
import { Code, ConnectError } from "@connectrpc/connect";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { gatewayLiveResubscriptions } from "@switchyard/platform/metrics.js";
import {
  LiveFanout,
  type IsNew,
  type LiveEvent,
  type LiveSubscription,
  type OpenShared,
} from "../src/runtime/live-fanout.js";

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

/** The events after `cN` (what a subscriber's own stream sent last): ids compare by their number. */
const after =
  (n: number): IsNew =>
  (e) =>
    Number(e.id.slice(1)) > n;

/** Follows a subscription, collecting what its writer is given; `keep` false makes the writer say it is done. */
function follow(sub: LiveSubscription, isNew: IsNew = () => true) {
  const f = {
    events: [] as LiveEvent[],
    keep: true,
    ended: undefined as unknown as Promise<void>,
    ids: () => f.events.map((e) => e.id),
  };
  f.ended = sub.follow(isNew, (event) => {
    f.events.push(event);
    return f.keep;
  });
  f.ended.catch(() => undefined);
  return f;
}

const POLICY = { outageMs: 30_000 };

describe("gateway: shared live streams (fan-out)", () => {
  const logger = createLogger("gateway-test", "silent");

  it("opens one upstream stream per key however many subscribe, and hands every subscriber the same event object (framed once)", async () => {
    const fanout = new LiveFanout(logger, POLICY);
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
    const fanout = new LiveFanout(logger, POLICY);
    const upstream = simulatedUpstream();
    const sub = await fanout.join("posts/acme", credential("a"), upstream.open);
    for (const n of [4, 5, 6, 7]) upstream.opened[0]!.events.push(event(n));
    await tick();
    // Its own stream replayed up to c5 (c4 and c5 were made during the replay, so both streams have them).
    const f = follow(sub, after(5));
    expect(f.ids(), "what was held, at once").to.deep.equal(["c6", "c7"]);
    upstream.opened[0]!.events.push(event(8));
    await tick();
    expect(f.ids()).to.deep.equal(["c6", "c7", "c8"]);
    sub.leave();
  });

  it("when the upstream refuses the token it was opened with, reopens after the last event with the subscriber token that stays good longest — nothing is lost", async () => {
    const fanout = new LiveFanout(logger, POLICY);
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
    const fanout = new LiveFanout(logger, POLICY);
    const upstream = simulatedUpstream(() => true);
    let refused: unknown;
    await fanout.join("posts/acme", credential("revoked"), upstream.open).catch((err: unknown) => (refused = err));
    expect(String(refused)).to.match(/no subscriber of the live feed holds a token that is still good/);
    expect(fanout.size).to.equal(0);
  });

  it("tells a subscriber whose own token ran out that it expired, when the upstream ends the stream before the edge's watch of that token does", async () => {
    const fanout = new LiveFanout(logger, POLICY);
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

  it("tells a subscriber whose token the upstream refused what it said (revoked), when no other subscriber's token is good — before the edge's own watch of that token does", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const upstream = simulatedUpstream();
    const sub = await fanout.join("posts/acme", credential("logged-out"), upstream.open);
    const f = follow(sub);
    upstream.opened[0]!.events.fail(fail("UNAUTHENTICATED", "the token was revoked (logged out)"));
    let ended: unknown;
    await f.ended.catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/the token was revoked \(logged out\)/);
    expect(ConnectError.from(ended).code).to.equal(Code.Unauthenticated);
    expect(fanout.size).to.equal(0);
  });

  it("closes the upstream stream when its last subscriber leaves; the next subscriber opens a new one", async () => {
    const fanout = new LiveFanout(logger, POLICY);
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

  it("ends every subscriber with the error when the upstream ends the stream for another reason than a drop (they reconnect with their last event id), and frees the key", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const upstream = simulatedUpstream();
    const subs = await Promise.all(["a", "b"].map((t) => fanout.join("posts/acme", credential(t), upstream.open)));
    const followers = subs.map((s) => follow(s));
    upstream.opened[0]!.events.fail(fail("STREAM_READER_TOO_SLOW", "the watch fell too far behind the feed"));
    for (const f of followers) {
      let ended: unknown;
      await f.ended.catch((err: unknown) => (ended = err));
      expect(String(ended)).to.match(/fell too far behind/);
    }
    expect(fanout.size).to.equal(0);
    const again = await fanout.join("posts/acme", credential("a"), upstream.open);
    expect(upstream.opened.length).to.equal(2);
    again.leave();
  });

  it("ends every feed of every key with the error when the gateway stops (endAll), closing each upstream stream", async () => {
    const fanout = new LiveFanout(logger, POLICY);
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
    const fanout = new LiveFanout(logger, POLICY);
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
    await slow
      .follow(
        () => true,
        () => true,
      )
      .catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/fell too far behind/);
    expect(fastFollower.events.length).to.equal(12);
    expect(upstream.opened[0]!.signal.aborted, "the shared stream goes on").to.equal(false);
    for (const s of [slow, done, fast]) s.leave();
    expect(upstream.opened[0]!.signal.aborted).to.equal(true);
  });
});

/** What grpc-js reports when a connection goes: at its age (GOAWAY, then cut after the grace), or its server stops. */
const unavailable = (message: string) => new ConnectError(message, Code.Unavailable);

/**
 * The feed as content serves it: a log of events; a stream opened after a position replays what came
 * after it, then follows. The test publishes, drops every open stream, ends them without a word, or
 * takes the upstream away — its opens refused (no replica) or left unanswered.
 */
function simulatedFeed() {
  const log: LiveEvent[] = [];
  const streams: { position: string; events: AsyncQueue<LiveEvent> }[] = [];
  const feed = {
    log,
    streams,
    state: "up" as "up" | "refusing" | "silent" | "replay-too-long",
    /** When each refused open was refused (Date.now()). */
    refusals: [] as number[],
    open: (async (position, _headers, signal) => {
      if (feed.state === "refusing") {
        feed.refusals.push(Date.now());
        throw unavailable("No connection established");
      }
      if (feed.state === "replay-too-long")
        throw fail("REPLAY_TOO_LONG", "more than 1000 posts were made after that position");
      if (feed.state === "silent")
        return new Promise<never>((_, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true }),
        );
      const events = new AsyncQueue<LiveEvent>();
      signal.addEventListener("abort", () => events.close(), { once: true });
      const from = position === "" ? log.length : log.findIndex((e) => e.id === position) + 1;
      for (const e of log.slice(from)) events.push(e);
      streams.push({ position, events });
      // Like content's: without a position, the tail starts after the newest event there is.
      return Object.assign(events, { after: position || (log.at(-1)?.id ?? "") });
    }) as OpenShared,
    publish(...ns: number[]) {
      for (const n of ns) {
        const e = event(n);
        log.push(e);
        if (feed.state === "up") streams.at(-1)?.events.push(e);
      }
    },
    /** Every open stream fails with `err` (or, without, ends without a word). */
    drop(err?: unknown) {
      const current = streams.at(-1)?.events;
      if (err === undefined) current?.close();
      else current?.fail(err);
    },
  };
  return feed;
}

async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function resubscribed(stream: "shared" | "catch_up"): Promise<number> {
  return (await gatewayLiveResubscriptions.get()).values.find((v) => v.labels.stream === stream)?.value ?? 0;
}

/** Whether a follow has ended (by now), and how. */
function settled(f: { ended: Promise<void> }) {
  const state = { done: false, error: undefined as unknown };
  f.ended.then(
    () => (state.done = true),
    (err: unknown) => {
      state.done = true;
      state.error = err;
    },
  );
  return state;
}

describe("gateway: shared live streams across upstream drops (connection rotations, restarts, outages)", () => {
  const logger = createLogger("gateway-test", "silent");
  const ids = (...ns: number[]) => ns.map((n) => `c${n}`);

  it("reopens the shared stream after the last event it delivered whenever the upstream drops it — several times over — and every subscriber gets every event once, in order, with no error", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const feed = simulatedFeed();
    const counted = await resubscribed("shared");
    const subs = [
      await fanout.join("posts/acme", credential("a"), feed.open),
      await fanout.join("posts/acme", credential("b"), feed.open),
    ];
    const followers = subs.map((s) => follow(s));
    const endings = followers.map(settled);
    feed.publish(1, 2, 3);
    await until("c3 arrived", () => followers.every((f) => f.events.length === 3));
    // Content's connection reached its age: grpc-js cuts it after the grace.
    feed.drop(unavailable("Connection dropped"));
    feed.publish(4, 5); // made while the stream was down: the reopened stream replays them
    await until("reopened", () => feed.streams.length === 2);
    feed.publish(6);
    await until("c6 arrived", () => followers.every((f) => f.events.length === 6));
    // A replica stopping ends its streams so; then one that ends its stream without a word.
    feed.drop(unavailable("the server is shutting down; reconnect"));
    await until("reopened again", () => feed.streams.length === 3);
    feed.publish(7);
    await until("c7 arrived", () => followers.every((f) => f.events.length === 7));
    feed.drop();
    await until("reopened a third time", () => feed.streams.length === 4);
    feed.publish(8);
    await until("c8 arrived", () => followers.every((f) => f.events.length === 8));
    expect(
      feed.streams.map((s) => s.position),
      "each reopened after the last event delivered",
    ).to.deep.equal(["", "c3", "c6", "c7"]);
    for (const f of followers) expect(f.ids()).to.deep.equal(ids(1, 2, 3, 4, 5, 6, 7, 8));
    for (const e of endings) expect(e.done, "no feed ended").to.equal(false);
    expect(fanout.size).to.equal(1);
    expect((await resubscribed("shared")) - counted, "counted").to.equal(3);
    for (const s of subs) s.leave();
  });

  it("rides out an upstream that refuses to open for a while (no replica), backing off between attempts, then resumes after the last event with nothing lost", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const feed = simulatedFeed();
    const sub = await fanout.join("posts/acme", credential("a"), feed.open);
    const f = follow(sub);
    const ending = settled(f);
    feed.publish(1);
    await until("c1 arrived", () => f.events.length === 1);
    feed.state = "refusing";
    const droppedAt = Date.now();
    feed.drop(unavailable("Connection dropped"));
    feed.publish(2, 3);
    await until("three attempts refused", () => feed.refusals.length >= 3);
    // At once, then after at least 50 ms (half of 100, jittered), then at least 100 ms more.
    expect(feed.refusals[0]! - droppedAt).to.be.below(50);
    expect(feed.refusals[2]! - droppedAt).to.be.at.least(150);
    feed.state = "up";
    await until("reopened", () => feed.streams.length === 2);
    feed.publish(4);
    await until("c4 arrived", () => f.events.length === 4);
    expect(feed.streams[1]!.position).to.equal("c1");
    expect(f.ids()).to.deep.equal(ids(1, 2, 3, 4));
    expect(ending.done).to.equal(false);
    sub.leave();
  });

  it("does not reopen in a tight loop an upstream that accepts the stream and drops it at once: the back-off goes on", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const feed = simulatedFeed();
    feed.publish(0);
    const sub = await fanout.join("posts/acme", credential("a"), feed.open);
    const f = follow(sub);
    const ending = settled(f);
    const start = Date.now();
    // Every stream it opens is dropped as soon as it is confirmed.
    const flapping = setInterval(() => feed.drop(unavailable("Connection dropped")), 1);
    await until("four reopenings", () => feed.streams.length >= 5);
    clearInterval(flapping);
    // At once, then after at least 50, 100 and 200 ms (each half of its delay, jittered): not hundreds a second.
    expect(Date.now() - start).to.be.at.least(350);
    feed.publish(1);
    await until("c1 arrived", () => f.events.length === 1);
    expect(f.ids()).to.deep.equal(ids(1));
    expect(ending.done, "the feed goes on").to.equal(false);
    sub.leave();
  });

  for (const state of ["refusing", "silent"] as const) {
    it(`ends the feeds with the drop's error once the upstream stayed away past the bound, not before (its opens ${state === "refusing" ? "refused" : "left unanswered"}), and frees the key`, async () => {
      const fanout = new LiveFanout(logger, { outageMs: 300 });
      const feed = simulatedFeed();
      const subs = [
        await fanout.join("posts/acme", credential("a"), feed.open),
        await fanout.join("posts/acme", credential("b"), feed.open),
      ];
      const followers = subs.map((s) => follow(s));
      feed.publish(1);
      await until("c1 arrived", () => followers.every((f) => f.events.length === 1));
      feed.state = state;
      const droppedAt = Date.now();
      feed.drop(unavailable("Connection dropped"));
      for (const f of followers) {
        let ended: unknown;
        await f.ended.catch((err: unknown) => (ended = err));
        expect(Date.now() - droppedAt, "rode out up to the bound").to.be.at.least(300);
        expect(ConnectError.from(ended).code).to.equal(Code.Unavailable);
        expect(f.ids()).to.deep.equal(ids(1));
      }
      expect(fanout.size).to.equal(0);
    });
  }

  it("ends the feeds at once when reopening meets a refusal that is no drop (REPLAY_TOO_LONG)", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const feed = simulatedFeed();
    const sub = await fanout.join("posts/acme", credential("a"), feed.open);
    const f = follow(sub);
    feed.state = "replay-too-long";
    feed.drop(unavailable("Connection dropped"));
    let ended: unknown;
    await f.ended.catch((err: unknown) => (ended = err));
    expect(String(ended)).to.match(/more than 1000 posts/);
    expect(fanout.size).to.equal(0);
  });

  it("a subscriber that joins while the shared stream is down, its own stream ahead of it, gets each event once; its tail starts where the shared stream stood", async () => {
    const fanout = new LiveFanout(logger, POLICY);
    const feed = simulatedFeed();
    feed.publish(1);
    const early = await fanout.join("posts/acme", credential("a"), feed.open);
    expect(early.after, "the first open starts after the newest event").to.equal("c1");
    const earlyFollower = follow(early);
    feed.publish(2, 3);
    await until("c3 arrived", () => earlyFollower.events.length === 2);
    feed.state = "refusing";
    feed.drop(unavailable("Connection dropped"));
    feed.publish(4, 5, 6);
    const late = await fanout.join("posts/acme", credential("b"), feed.open);
    expect(late.after).to.equal("c3");
    // Its own stream (content is back for it) replayed up to c6: the shared stream, reopening after c3, replays c4..c6 too.
    const lateFollower = follow(late, after(6));
    feed.state = "up";
    await until("reopened", () => feed.streams.length === 2);
    feed.publish(7);
    await until("c7 arrived", () => earlyFollower.events.length === 6 && lateFollower.events.length === 1);
    expect(earlyFollower.ids()).to.deep.equal(ids(2, 3, 4, 5, 6, 7));
    expect(lateFollower.ids()).to.deep.equal(ids(7));
    early.leave();
    late.leave();
  });

  describe("a subscriber's own (catch-up) stream", () => {
    const replay = (...ns: number[]) => {
      const q = new AsyncQueue<LiveEvent>();
      for (const n of ns) q.push(event(n));
      return q;
    };
    async function drain(events: AsyncIterable<LiveEvent>): Promise<{ ids: string[]; error: unknown }> {
      const seen: string[] = [];
      try {
        for await (const e of events) seen.push(e.id);
      } catch (err) {
        return { ids: seen, error: err };
      }
      return { ids: seen, error: undefined };
    }

    it("is opened again after the last event it sent when it drops, and ends once caught up", async () => {
      const fanout = new LiveFanout(logger, POLICY);
      const counted = await resubscribed("catch_up");
      const first = replay(1, 2);
      first.fail(unavailable("Connection dropped"));
      const positions: string[] = [];
      const rest = replay(3);
      rest.close(); // caught up
      const { ids: got, error } = await drain(
        fanout.resumable(
          first,
          async (position) => {
            positions.push(position);
            return rest;
          },
          "c0",
          new AbortController().signal,
        ),
      );
      expect(error).to.equal(undefined);
      expect(got).to.deep.equal(ids(1, 2, 3));
      expect(positions).to.deep.equal(["c2"]);
      expect((await resubscribed("catch_up")) - counted).to.equal(1);
    });

    it("ends with the drop's error once it cannot be reopened within the bound, and at once on a refusal that is no drop", async () => {
      const fanout = new LiveFanout(logger, { outageMs: 200 });
      const dropped = () => {
        const q = replay(1);
        q.fail(unavailable("Connection dropped"));
        return q;
      };
      const start = Date.now();
      const away = await drain(
        fanout.resumable(
          dropped(),
          async () => {
            throw unavailable("No connection established");
          },
          "",
          new AbortController().signal,
        ),
      );
      expect(Date.now() - start).to.be.at.least(200);
      expect(away.ids).to.deep.equal(ids(1));
      expect(ConnectError.from(away.error).code).to.equal(Code.Unavailable);
      const refused = await drain(
        fanout.resumable(
          dropped(),
          async () => {
            throw fail("TENANT_MISMATCH", "not yours");
          },
          "",
          new AbortController().signal,
        ),
      );
      expect(String(refused.error)).to.match(/not yours/);
    });
  });
});

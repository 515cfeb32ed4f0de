// The outbox relay on every store adapter: events are handed on oldest first and marked relayed only
// once the receiver took them; a failed hand-over leaves them to be sent again, so every committed
// event reaches the receiver at least once. It wakes on a commit's NOTIFY, not the poll; with a lease,
// one relay of several sends, and when its holder hangs or stops another takes over, losing nothing.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "@switchyard/platform/logger.js";
import { registry } from "@switchyard/platform/metrics.js";
import { OutboxRelay } from "@switchyard/platform/outbox-relay.js";
import {
  LEASES_TABLE_SQL,
  OUTBOX_TABLE_SQL,
  appendEvent,
  unrelayedEvents,
  type Migration,
  type OutboxEvent,
  type SqlDatabase,
} from "@switchyard/platform/store";
import { forEachDatabase } from "./support/databases.js";

const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "outbox", sql: OUTBOX_TABLE_SQL },
  { version: 2, name: "leases", sql: LEASES_TABLE_SQL },
];
const logger = createLogger("test", "silent");

forEachDatabase("outbox relay", (dbs) => {
  let db: SqlDatabase;
  /** The same database as a second replica sees it (its own connections on a server; PGlite is one process's). */
  let replicaDb: SqlDatabase;
  beforeEach(async () => {
    const place = dbs.place();
    db = await place.open(MIGRATIONS);
    replicaDb = dbs.target.sharedOpens ? await place.open(MIGRATIONS) : db;
  });

  const until = async (what: string, done: () => boolean | Promise<boolean>, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(10);
    }
  };

  const append = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++)
      ids.push(
        (await db.transaction((tx) => appendEvent(tx, { type: "t.x", tenantId: "acme", resource: randomBytes(8) }))).id,
      );
    return ids;
  };

  it("hands events on oldest first, in batches, and marks them relayed once taken", async () => {
    const ids = await append(5);
    const sent: string[][] = [];
    const relay = new OutboxRelay(db, async (events) => void sent.push(events.map((e) => e.id)), {
      pollMs: 50,
      batch: 2,
      logger,
    });
    expect(await relay.runOnce()).to.equal(2);
    expect(await relay.runOnce()).to.equal(2);
    expect(await relay.runOnce()).to.equal(1);
    expect(await relay.runOnce()).to.equal(0);
    expect(sent).to.deep.equal([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
    expect(await unrelayedEvents(db, 10)).to.deep.equal([]);
  });

  it("keeps what the receiver did not take, and sends it again until it does: every event at least once", async () => {
    const ids = await append(3);
    const received = new Set<string>();
    let failures = 2;
    const relay = new OutboxRelay(
      db,
      async (events: OutboxEvent[]) => {
        // The receiver records the batch, then the answer is lost: the relay cannot tell.
        for (const e of events) received.add(e.id);
        if (failures-- > 0) throw new Error("the answer was lost");
      },
      { pollMs: 20, batch: 10, logger },
    );
    relay.start();
    try {
      for (let i = 0; i < 100 && (await unrelayedEvents(db, 10)).length > 0; i++) await sleep(50);
      expect(await unrelayedEvents(db, 10), "all relayed in the end").to.deep.equal([]);
      const later = await append(1);
      for (let i = 0; i < 100 && !received.has(later[0]!); i++) await sleep(20);
      expect([...received].sort()).to.deep.equal([...ids, ...later].sort());
    } finally {
      await relay.stop();
    }
  });

  it("stops without waiting for a receiver that does not answer: the hand-over in flight is given up, its events kept", async () => {
    await append(2);
    let called = false;
    const relay = new OutboxRelay(
      db,
      (_events, signal) =>
        new Promise<void>((_resolve, reject) => {
          called = true;
          signal.addEventListener("abort", () => reject(new Error("given up")));
        }),
      { pollMs: 20, batch: 10, logger },
    );
    relay.start();
    for (let i = 0; i < 100 && !called; i++) await sleep(10);
    await sleep(1_100);
    // The events wait: the outbox's age says so.
    const age = (await registry.getSingleMetric("switchyard_outbox_oldest_unrelayed_age_seconds")!.get()).values[0]!
      .value;
    expect(age).to.be.at.least(1);
    const started = Date.now();
    await relay.stop();
    expect(Date.now() - started).to.be.below(1_000);
    expect(await unrelayedEvents(db, 10)).to.have.length(2);
  });

  it("wakes on a commit (NOTIFY), not the poll: an event reaches the receiver at once", async () => {
    const received: string[] = [];
    const relay = new OutboxRelay(db, async (events) => void received.push(...events.map((e) => e.id)), {
      pollMs: 600_000,
      batch: 10,
      logger,
    });
    relay.start();
    try {
      await until("the first look at the outbox", async () => (await unrelayedEvents(db, 1)).length === 0);
      await sleep(200);
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        const [id] = await append(1);
        await until("the event", () => received.includes(id!), 5_000);
        expect(Date.now() - started).to.be.below(1_000);
      }
    } finally {
      await relay.stop();
    }
  });

  const leased = (
    on: SqlDatabase,
    holder: string,
    send: (events: OutboxEvent[], signal: AbortSignal) => Promise<void>,
    ttlMs = 900,
  ) =>
    new OutboxRelay(on, send, { pollMs: 600_000, batch: 10, logger, lease: { name: "outbox.relay", holder, ttlMs } });

  it("with a lease, one relay of two sends; the other takes over at once when the holder stops, losing nothing", async () => {
    const sent = { a: [] as string[], b: [] as string[] };
    const a = leased(db, "a", async (events) => void sent.a.push(...events.map((e) => e.id)));
    const b = leased(replicaDb, "b", async (events) => void sent.b.push(...events.map((e) => e.id)));
    a.start();
    await until("a to take the lease", () => a.relaying);
    b.start();
    try {
      const first: string[] = [];
      for (let i = 0; i < 10; i++) {
        first.push(...(await append(2)));
        await sleep(20);
      }
      await until("the first events relayed", () => sent.a.length >= first.length);
      await sleep(400);
      expect(sent.a, "a sent each once, in order").to.deep.equal(first);
      expect(sent.b, "b, without the lease, sent none").to.deep.equal([]);
      expect(b.relaying).to.equal(false);

      await a.stop();
      const started = Date.now();
      const later = await append(3);
      await until("b to relay the later events", () => later.every((id) => sent.b.includes(id)));
      // b tries for the lease every third of its time: a stopped holder let it go.
      expect(Date.now() - started).to.be.below(900);
      expect(sent.b).to.deep.equal(later);
      await until("them marked relayed", async () => (await unrelayedEvents(db, 10)).length === 0);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it("a holder that hangs mid-hand-over loses its lease: another takes over within the lease, and no event is lost", async () => {
    const ttlMs = 900;
    let hung = 0;
    const received = new Set<string>();
    // a takes the events and never answers (as a killed or frozen replica does), until it is stopped.
    const a = leased(
      db,
      "a",
      (events, signal) =>
        new Promise<void>((_resolve, reject) => {
          hung += events.length;
          signal.addEventListener("abort", () => reject(new Error("stopped")));
        }),
      ttlMs,
    );
    const b = leased(replicaDb, "b", async (events) => void events.forEach((e) => received.add(e.id)), ttlMs);
    a.start();
    await until("a to take the lease", () => a.relaying);
    b.start();
    try {
      const ids = await append(5);
      const started = Date.now();
      await until("a to hang on the events", () => hung > 0);
      await until("b to relay them", () => ids.every((id) => received.has(id)), 10_000);
      const tookOver = Date.now() - started;
      // The lease's time, plus a third of it before b tries again, and some slack for a busy machine.
      expect(tookOver).to.be.below(2 * ttlMs + 500);
      expect(tookOver, "not before a's lease ran out").to.be.at.least(ttlMs / 3);
      const more = await append(2);
      await until("b to relay what came next", () => more.every((id) => received.has(id)));
      await until("every event marked relayed", async () => (await unrelayedEvents(db, 10)).length === 0);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it("a holder whose process dies (its connections gone, its lease kept) is replaced within the lease (a server)", async function () {
    // On PGlite the database dies with the process that holds it: two replicas share a server only.
    if (!dbs.target.sharedOpens) this.skip();
    const ttlMs = 900;
    const sent = { a: [] as string[], b: [] as string[] };
    const a = leased(db, "a", async (events) => void sent.a.push(...events.map((e) => e.id)), ttlMs);
    const b = leased(replicaDb, "b", async (events) => void sent.b.push(...events.map((e) => e.id)), ttlMs);
    a.start();
    await until("a to take the lease", () => a.relaying);
    b.start();
    try {
      const before = await append(3);
      await until("a to relay the first events", async () => (await unrelayedEvents(db, 10)).length === 0);
      // As kill -9 leaves it: a's connections closed by the server's side, nothing let go.
      await db.close();
      const killedAt = Date.now();
      const later: string[] = [];
      for (let i = 0; i < 3; i++)
        later.push(
          (
            await replicaDb.transaction((tx) =>
              appendEvent(tx, { type: "t.x", tenantId: "acme", resource: randomBytes(8) }),
            )
          ).id,
        );
      await until("b to relay what came after", () => later.every((id) => sent.b.includes(id)));
      expect(Date.now() - killedAt).to.be.below(2 * ttlMs + 500);
      expect(sent.b, "b sends what a had not relayed, and only that").to.deep.equal(later);
      expect(sent.a).to.deep.equal(before);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

// The outbox relay on every store adapter: events are handed on oldest first and marked relayed only
// once the receiver took them; a failed hand-over leaves them to be sent again, so every committed
// event reaches the receiver at least once.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "@switchyard/platform/logger.js";
import { registry } from "@switchyard/platform/metrics.js";
import { OutboxRelay } from "@switchyard/platform/outbox-relay.js";
import {
  OUTBOX_TABLE_SQL,
  appendEvent,
  unrelayedEvents,
  type Migration,
  type OutboxEvent,
  type SqlDatabase,
} from "@switchyard/platform/store";
import { forEachDatabase } from "./support/databases.js";

const MIGRATIONS: readonly Migration[] = [{ version: 1, name: "outbox", sql: OUTBOX_TABLE_SQL }];
const logger = createLogger("test", "silent");

forEachDatabase("outbox relay", (dbs) => {
  let db: SqlDatabase;
  beforeEach(async () => {
    db = await dbs.open(MIGRATIONS);
  });

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
});

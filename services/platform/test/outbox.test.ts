// The outbox on every store adapter: an event appended in a transaction exists exactly when that
// transaction commits (and only then notifies the schema's outbox channel); unrelayed events come
// oldest first, and marking them relayed is idempotent.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  OUTBOX_TABLE_SQL,
  appendEvent,
  markEventsRelayed,
  outboxChannel,
  unrelayedEvents,
  type Migration,
  type SqlDatabase,
} from "@switchyard/platform/store";
import { isIdOf } from "@switchyard/platform/ids.js";
import { forEachDatabase } from "./support/databases.js";

const MIGRATIONS: readonly Migration[] = [{ version: 1, name: "outbox", sql: OUTBOX_TABLE_SQL }];

forEachDatabase("outbox of events", (dbs) => {
  let db: SqlDatabase;
  beforeEach(async () => {
    db = await dbs.open(MIGRATIONS);
  });

  const event = (type: string) => ({ type, tenantId: "acme", resource: randomBytes(40) });

  it("keeps an event appended in a committed transaction, with its resource byte for byte", async () => {
    const sent = event("payment.succeeded");
    const appended = await db.transaction((tx) => appendEvent(tx, sent));
    expect(isIdOf("evt", appended.id)).to.equal(true);
    const [stored] = await unrelayedEvents(db, 10);
    expect(stored).to.deep.equal({
      ...sent,
      resource: new Uint8Array(sent.resource),
      id: appended.id,
      occurredAt: appended.occurredAt,
    });
  });

  it("keeps nothing of a transaction rolled back after the event was appended", async () => {
    const failure = await db
      .transaction(async (tx) => {
        await appendEvent(tx, event("order.paid"));
        throw new Error("the change failed");
      })
      .catch((err: unknown) => err);
    expect(String(failure)).to.contain("the change failed");
    expect(await unrelayedEvents(db, 10)).to.deep.equal([]);
  });

  it("lists unrelayed events oldest first, up to the limit; relayed ones no more, marked twice or not", async () => {
    const ids: string[] = [];
    for (const type of ["a.one", "a.two", "a.three"])
      ids.push((await db.transaction((tx) => appendEvent(tx, event(type)))).id);
    expect((await unrelayedEvents(db, 2)).map((e) => e.id)).to.deep.equal(ids.slice(0, 2));
    await markEventsRelayed(db, [ids[0]!]);
    await markEventsRelayed(db, [ids[0]!, ids[2]!]);
    await markEventsRelayed(db, []);
    expect((await unrelayedEvents(db, 10)).map((e) => e.type)).to.deep.equal(["a.two"]);
  });

  it("notifies the schema's outbox channel when the append commits, never when it is rolled back", async () => {
    const heard: string[] = [];
    const stop = await db.listen(outboxChannel(db.schema), (payload) => heard.push(payload));
    try {
      await db
        .transaction(async (tx) => {
          await appendEvent(tx, event("order.paid"));
          throw new Error("the change failed");
        })
        .catch(() => {});
      await sleep(200);
      expect(heard, "nothing for a rolled-back append").to.deep.equal([]);
      await db.transaction(async (tx) => {
        await appendEvent(tx, event("order.paid"));
        await appendEvent(tx, event("order.shipped"));
      });
      for (let i = 0; i < 100 && heard.length === 0; i++) await sleep(20);
      expect(heard, "one notification for the transaction").to.deep.equal([""]);
    } finally {
      await stop();
    }
  });
});

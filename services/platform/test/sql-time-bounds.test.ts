// Time bounds in the database (PostgreSQL server): a call's statements get no more time than the
// call has left, server side too (the statement is cancelled, not left running after the 504); a lock
// wait ends the same way; a pool with no free connection answers 503 instead of hanging; a database
// that cannot be reached answers 503, not 500; a pool never opens more connections than it is given
// (DATABASE_POOL_MAX).
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { DomainError } from "@switchyard/platform/domain-error.js";
import type { SqlDatabase } from "@switchyard/platform/store";
import type { CallScope } from "@switchyard/platform/call-deadline.js";
import { TcpGate } from "./support/tcp-gate.js";
import { serverSchemaSuite } from "./support/server-schema.js";

const url = process.env.DATABASE_URL;

const reasonOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => (e instanceof DomainError ? e.reason : `not a DomainError: ${String(e)}`),
  );

/** A call with `ms` left. */
const callWithin = (ms: number): CallScope => ({ deadlineAt: Date.now() + ms, requestId: undefined });

describe("database time bounds (PostgreSQL server)", function () {
  this.timeout(30_000);
  const { open } = serverSchemaSuite("database time bounds");

  it("cancels a call's statement on the server when the call's time is up (504), and the connection serves on", async () => {
    const db = await open();
    const marker = `sleepy_${randomBytes(4).toString("hex")}`;
    const started = Date.now();
    const reason = await reasonOf(db.transaction((tx) => tx.query(`SELECT pg_sleep(5), '${marker}'`), callWithin(300)));
    expect(reason).to.equal("DEADLINE_EXCEEDED");
    expect(Date.now() - started).to.be.below(2_000);
    const running = await db.query<{ n: bigint }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()`,
      [`%${marker}%`],
    );
    expect(Number(running.rows[0]!.n), "nothing of it still runs on the server").to.equal(0);
    expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).to.equal(1);
  });

  it("ends a lock wait at the call's deadline (504) instead of waiting for the holder", async () => {
    const db = await open({ maxConnections: 4 });
    await db.query("INSERT INTO rows (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING");
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    const holder = db.transaction(async (tx) => {
      await tx.query("SELECT n FROM rows WHERE id = 1 FOR UPDATE");
      await held;
    });
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    const reason = await reasonOf(
      db.transaction((tx) => tx.query("UPDATE rows SET n = n + 1 WHERE id = 1"), callWithin(300)),
    );
    expect(reason).to.equal("DEADLINE_EXCEEDED");
    expect(Date.now() - started).to.be.below(2_000);
    release();
    await holder;
    expect(
      (await db.query<{ n: number }>("SELECT n FROM rows WHERE id = 1")).rows[0]!.n,
      "the refused update changed nothing",
    ).to.equal(0);
  });

  it("answers 503 STORE_UNAVAILABLE when no connection comes free in time, instead of hanging", async () => {
    const db = await open({ maxConnections: 1 });
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    const holder = db.transaction(async () => {
      await held;
    });
    const started = Date.now();
    expect(await reasonOf(db.query("SELECT 1"))).to.equal("STORE_UNAVAILABLE");
    expect(Date.now() - started).to.be.within(1_000, 5_000);
    release();
    await holder;
    expect(
      (await db.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one,
      "and serves again once one is free",
    ).to.equal(1);
  });

  it("answers 503 STORE_UNAVAILABLE while the database cannot be reached, and serves again when it can", async () => {
    const target = new URL(url!);
    const gate = await TcpGate.before(`${target.hostname}:${target.port || "5432"}`);
    try {
      const through = new URL(url!);
      through.host = gate.address;
      const db = await open({ databaseUrl: through.toString() });
      gate.shut();
      expect(await reasonOf(db.query("SELECT 1"))).to.equal("STORE_UNAVAILABLE");
      expect(await reasonOf(db.transaction((tx) => tx.query("SELECT 1")))).to.equal("STORE_UNAVAILABLE");
      gate.reopen();
      let answer: unknown;
      for (let i = 0; i < 20 && answer === undefined; i++)
        answer = await db.query<{ one: number }>("SELECT 1 AS one").then(
          (r) => r.rows[0]!.one,
          () => undefined,
        );
      expect(answer).to.equal(1);
    } finally {
      await gate.close();
    }
  });

  it("opens no more connections than its pool is given (DATABASE_POOL_MAX): the rest wait their turn", async () => {
    const db = await open({ maxConnections: 2 });
    const marker = `pooled_${randomBytes(4).toString("hex")}`;
    const work = Array.from({ length: 5 }, () => db.transaction((tx) => tx.query(`SELECT pg_sleep(0.3), '${marker}'`)));
    await new Promise((r) => setTimeout(r, 150));
    const pooled = db as SqlDatabase & { inUse: number; waiting: number };
    expect([pooled.inUse, pooled.waiting], "in use, waiting").to.deep.equal([2, 3]);
    const client = new pg.Client(url);
    await client.connect();
    try {
      // Sampled while the five run (a loaded machine may not have both statements running at one
      // instant): never more than two at once on the server, and two at some point.
      const seen: number[] = [];
      for (let i = 0; i < 40; i++) {
        const running = await client.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`,
          [`%${marker}%`],
        );
        seen.push(Number(running.rows[0]!.n));
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(Math.max(...seen), `connections on the server, sampled: ${seen.join(",")}`).to.equal(2);
    } finally {
      await client.end();
    }
    await Promise.all(work);
  });
});

// The PostgreSQL adapter when the server moves under it (a server of the test's own): restarted fast
// or immediately, its backends terminated, or down for a while. Nothing of it ends the process (an
// unheard `error` of a connection would: mocha fails the test on it), every failure a caller sees is
// the catalogue's STORE_UNAVAILABLE (or, for a COMMIT cut off, DEADLINE_EXCEEDED: the outcome is not
// known), a transaction cut off stores nothing, a broken connection is never handed out again, and
// the first statement after the server is back succeeds. LISTEN comes back by itself and says so.
import { expect } from "chai";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { startPostgresServer, type PostgresServer, type StopMode } from "./support/postgres-server.js";

const MIGRATIONS = [
  {
    version: 1,
    name: "rows",
    sql: `CREATE TABLE pairs (id bigserial PRIMARY KEY, a integer NOT NULL, b integer NOT NULL);
          CREATE TABLE counters (id integer PRIMARY KEY, n bigint NOT NULL);
          INSERT INTO counters VALUES (1, 0), (2, 0);`,
  },
];

const reasonOf = (err: unknown) => (err instanceof DomainError ? err.reason : `not a DomainError: ${String(err)}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Until `stop` is called: transactions that write a pair of rows in two statements, and reads, side by side. */
function workload(db: SqlDatabase, workers: number) {
  const reasons = new Map<string, number>();
  let committed = 0;
  let running = true;
  const note = (err: unknown) => {
    const reason = reasonOf(err);
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  };
  const loops = Array.from({ length: workers }, async (_, i) => {
    while (running) {
      try {
        if (i % 3 === 2) {
          await db.query("SELECT count(*) FROM pairs");
        } else {
          await db.transaction(async (tx) => {
            // Two statements with a pause between: a cut between them must store neither.
            await tx.query("UPDATE counters SET n = n + 1 WHERE id = 1");
            await tx.query("SELECT pg_sleep(0.02)");
            await tx.query("UPDATE counters SET n = n + 1 WHERE id = 2");
            await tx.query("INSERT INTO pairs (a, b) VALUES ($1, $1)", [i]);
          });
          committed++;
        }
      } catch (err) {
        note(err);
        await sleep(20);
      }
    }
  });
  return {
    reasons,
    get committed() {
      return committed;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Waits until a statement succeeds; how long that took. */
async function firstSuccess(db: SqlDatabase, timeoutMs = 10_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      await db.query("SELECT 1");
      return Date.now() - started;
    } catch (err) {
      if (Date.now() - started > timeoutMs) throw err;
      await sleep(20);
    }
  }
}

describe("PostgreSQL adapter under server faults (a server of its own)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let db: SqlDatabase;

  before(async function () {
    this.timeout(60_000);
    const started = await startPostgresServer();
    if ("skip" in started) {
      console.log(`    (skipped: ${started.skip})`);
      this.skip();
    }
    server = started;
    db = await openSqlDatabase({
      databaseUrl: server.url,
      schema: "faults",
      migrations: MIGRATIONS,
      maxConnections: 6,
    });
  });

  after(async function () {
    this.timeout(30_000);
    await db?.close();
    await server?.destroy();
  });

  /** Every pair was written whole: the two counters moved together, by two for each pair stored. */
  async function expectNothingHalfDone(): Promise<void> {
    const counters = await db.query<{ id: number; n: bigint }>("SELECT id, n FROM counters ORDER BY id");
    const pairs = await db.query<{ n: bigint }>("SELECT count(*)::bigint AS n FROM pairs");
    const [one, two] = counters.rows.map((r) => r.n);
    expect(one, "both counters moved in every transaction, or in none").to.equal(two);
    expect(one, "one pair stored for every counted transaction").to.equal(pairs.rows[0]!.n);
  }

  for (const mode of ["fast", "immediate"] as StopMode[]) {
    it(`a restart (-m ${mode}) under load: no process error, only STORE_UNAVAILABLE, nothing half-done, served again at once`, async () => {
      const load = workload(db, 6);
      await sleep(300);
      expect(load.committed, "the workload runs before the restart").to.be.above(0);
      await server.restart(mode);
      const backAfter = await firstSuccess(db);
      await sleep(200);
      await load.stop();
      expect(backAfter, "the first statement after the server is back succeeds within a second").to.be.below(1_000);
      const unexpected = [...load.reasons.keys()].filter((r) => r !== "STORE_UNAVAILABLE" && r !== "DEADLINE_EXCEEDED");
      expect(unexpected, JSON.stringify([...load.reasons])).to.deep.equal([]);
      expect(load.reasons.get("STORE_UNAVAILABLE") ?? 0, "the restart was felt").to.be.above(0);
      await expectNothingHalfDone();
    });
  }

  it("every backend terminated (pg_terminate_backend) mid-transaction: the connections are replaced, nothing half-done", async () => {
    const load = workload(db, 6);
    await sleep(300);
    for (let i = 0; i < 3; i++) {
      expect(await server.terminateBackends(), "there were backends to end").to.be.above(0);
      await sleep(150);
    }
    await load.stop();
    const unexpected = [...load.reasons.keys()].filter((r) => r !== "STORE_UNAVAILABLE" && r !== "DEADLINE_EXCEEDED");
    expect(unexpected, JSON.stringify([...load.reasons])).to.deep.equal([]);
    // No broken connection is handed out again: every statement now succeeds, on every connection.
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => db.query("SELECT pg_sleep(0.01)")));
    expect(results.filter((r) => r.status === "rejected")).to.have.length(0);
    await expectNothingHalfDone();
  });

  it("down for a while: STORE_UNAVAILABLE fast (a refused connection is tried once more, within the deadline), then serves again", async () => {
    await server.stop("fast");
    try {
      const started = Date.now();
      const failure = await db.query("SELECT 1").then(
        () => "answered",
        (err: unknown) => reasonOf(err),
      );
      const took = Date.now() - started;
      expect(failure).to.equal("STORE_UNAVAILABLE");
      expect(took, "tried once more after a short pause, no longer").to.be.within(200, 1_500);
      // A call with too little time left is not kept waiting for a second try.
      const quick = Date.now();
      const inCall = await db
        .transaction((tx) => tx.query("SELECT 1"), { deadlineAt: Date.now() + 300, requestId: undefined })
        .then(
          () => "answered",
          (err: unknown) => reasonOf(err),
        );
      expect(inCall).to.equal("STORE_UNAVAILABLE");
      expect(Date.now() - quick).to.be.below(250);
    } finally {
      await server.start();
    }
    expect(await firstSuccess(db)).to.be.below(1_000);
  });

  it("a refused connection is tried once more: a server listening again within the pause answers the statement", async () => {
    // A port in front of the server that stops listening (connections refused) and listens again.
    const open = new Set<Socket>();
    const front = createServer((socket) => {
      const upstream = connect(server.port, "127.0.0.1");
      socket.pipe(upstream).pipe(socket);
      for (const s of [socket, upstream]) {
        open.add(s);
        s.on("close", () => open.delete(s));
        s.on("error", () => (socket.destroy(), upstream.destroy()));
      }
    });
    /** Stops listening, and cuts what it carries (the pool's idle connections go too). */
    const refuse = async () => {
      await new Promise((resolve) => {
        front.close(resolve);
        for (const s of open) s.destroy();
      });
      await sleep(50);
    };
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    const port = (front.address() as AddressInfo).port;
    const viaFront = await openSqlDatabase({
      databaseUrl: server.url.replace(`:${server.port}/`, `:${port}/`),
      schema: "faults",
      migrations: MIGRATIONS,
    });
    try {
      await refuse();
      const answer = viaFront.query<{ one: number }>("SELECT 1 AS one");
      // The first try is refused at once; the port listens again well before the second.
      await sleep(50);
      front.listen(port, "127.0.0.1");
      expect((await answer).rows[0]?.one).to.equal(1);
      // A refusal that lasts is still one: after one more try, STORE_UNAVAILABLE.
      await refuse();
      expect(await viaFront.query("SELECT 1").then(() => "answered", reasonOf)).to.equal("STORE_UNAVAILABLE");
    } finally {
      front.close();
      await viaFront.close();
    }
  });

  it("LISTEN comes back after the server restarts, says so (onResync), and delivers what is notified afterwards", async () => {
    const got: string[] = [];
    let resyncs = 0;
    const stop = await db.listen(
      "faults_events",
      (payload) => got.push(payload),
      () => resyncs++,
    );
    try {
      await db.query("SELECT pg_notify('faults_events', 'before')");
      await waitUntil(() => got.includes("before"));
      await server.restart("immediate");
      await waitUntil(() => resyncs > 0);
      await firstSuccess(db);
      await db.query("SELECT pg_notify('faults_events', 'after')");
      await waitUntil(() => got.includes("after"));
      expect(got).to.deep.equal(["before", "after"]);
      expect(resyncs).to.equal(1);
    } finally {
      await stop();
    }
  });

  it("LISTEN of a connection terminated alone is made again, and its listener told", async () => {
    const got: string[] = [];
    let resyncs = 0;
    const stop = await db.listen(
      "faults_more",
      (payload) => got.push(payload),
      () => resyncs++,
    );
    try {
      await server.terminateBackends();
      await waitUntil(() => resyncs > 0);
      await db.query("SELECT pg_notify('faults_more', 'again')");
      await waitUntil(() => got.includes("again"));
    } finally {
      await stop();
    }
  });
});

async function waitUntil(done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > until) throw new Error("timed out");
    await sleep(20);
  }
}

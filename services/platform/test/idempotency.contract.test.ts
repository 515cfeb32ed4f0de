// Idempotency keys on every store adapter: one run per key, replays of the stored result, refusal
// of a key reused for another request, isolation of tenants and operations, nothing kept when the
// work fails, and exactly one winner among concurrent first calls.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { DomainError } from "@switchyard/platform/domain-error.js";
import {
  IDEMPOTENCY_PRINCIPAL_SQL,
  IDEMPOTENCY_TABLE_SQL,
  findIdempotentResult,
  purgeIdempotencyKeys,
  resolveIdempotencyKey,
  runIdempotent,
  type IdempotencyScope,
  type Migration,
  type ResultCodec,
  type SqlDatabase,
  type SqlExecutor,
} from "@switchyard/platform/store";
import { assertIdempotencyKey, requestFingerprint } from "@switchyard/platform/idempotency-keys.js";
import { forEachDatabase } from "./support/databases.js";

const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "idempotency keys", sql: IDEMPOTENCY_TABLE_SQL },
  {
    version: 2,
    name: "things",
    sql: "CREATE TABLE things (id serial PRIMARY KEY, tenant_id text NOT NULL, label text NOT NULL)",
  },
  { version: 3, name: "keys scoped by principal", sql: IDEMPOTENCY_PRINCIPAL_SQL },
];

interface Thing {
  id: number;
  label: string;
}

const thingCodec: ResultCodec<Thing> = {
  encode: (value) => new TextEncoder().encode(JSON.stringify(value)),
  decode: (bytes) => JSON.parse(new TextDecoder().decode(bytes)) as Thing,
};

async function reasonOf(promise: Promise<unknown>): Promise<string | undefined> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected the call to fail").to.be.instanceOf(DomainError);
  return (err as DomainError).reason;
}

forEachDatabase("idempotency keys contract (runIdempotent)", (dbs) => {
  let db: SqlDatabase;
  before(async () => {
    db = await dbs.open(MIGRATIONS);
  });

  /** A fresh tenant per test, so tests sharing the database never meet. */
  const tenant = () => `tenant-${randomUUID()}`;
  const scopeOf = (tenantId: string, overrides: Partial<IdempotencyScope<Thing>> = {}): IdempotencyScope<Thing> => ({
    tenantId,
    principal: "user:1",
    operation: "things.create",
    key: randomUUID(),
    requestHash: requestFingerprint({ label: "a" }),
    ...overrides,
  });

  /** The work under test: creates one thing and counts its runs. */
  const creator = (tenantId: string, label: string, delayMs = 0) => {
    const counter = {
      runs: 0,
      work: async (tx: SqlExecutor): Promise<Thing> => {
        counter.runs++;
        const { rows } = await tx.query<{ id: number }>(
          "INSERT INTO things (tenant_id, label) VALUES ($1, $2) RETURNING id",
          [tenantId, label],
        );
        if (delayMs) await sleep(delayMs);
        return { id: rows[0]?.id ?? -1, label };
      },
    };
    return counter;
  };

  const thingsOf = async (tenantId: string) =>
    (
      await db.query<{ label: string }>("SELECT label FROM things WHERE tenant_id = $1 ORDER BY id", [tenantId])
    ).rows.map((r) => r.label);
  const keysOf = async (tenantId: string) =>
    (
      await db.query<{ key: string; response: Uint8Array | null }>(
        "SELECT key, response FROM idempotency_keys WHERE tenant_id = $1",
        [tenantId],
      )
    ).rows;

  it("the first call runs the work once and stores its result with the key", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const create = creator(t, "first");
    const outcome = await runIdempotent(db, scope, thingCodec, create.work);
    expect(outcome.replayed).to.equal(false);
    expect(outcome.result.label).to.equal("first");
    expect(create.runs).to.equal(1);
    expect(await thingsOf(t)).to.deep.equal(["first"]);
    const keys = await keysOf(t);
    expect(keys).to.have.length(1);
    expect(keys[0]?.key).to.equal(scope.key);
    expect(thingCodec.decode(keys[0]?.response ?? new Uint8Array())).to.deep.equal(outcome.result);
  });

  it("a second call with the same key and request replays the stored result without running the work", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const create = creator(t, "once");
    const first = await runIdempotent(db, scope, thingCodec, create.work);
    const second = await runIdempotent(db, scope, thingCodec, create.work);
    const third = await runIdempotent(db, { ...scope, key: scope.key.toUpperCase() }, thingCodec, create.work);
    expect(second).to.deep.equal({ result: first.result, replayed: true });
    expect(third, "keys compare case-insensitively").to.deep.equal({ result: first.result, replayed: true });
    expect(create.runs).to.equal(1);
    expect(await thingsOf(t)).to.deep.equal(["once"]);
  });

  it("the same key with another request is refused with IDEMPOTENCY_KEY_REUSED, and the stored result stays", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const create = creator(t, "original");
    const first = await runIdempotent(db, scope, thingCodec, create.work);
    const other = { ...scope, requestHash: requestFingerprint({ label: "b" }) };
    expect(await reasonOf(runIdempotent(db, other, thingCodec, create.work))).to.equal("IDEMPOTENCY_KEY_REUSED");
    expect(create.runs).to.equal(1);
    expect(await runIdempotent(db, scope, thingCodec, create.work)).to.deep.equal({
      result: first.result,
      replayed: true,
    });
    expect(await thingsOf(t)).to.deep.equal(["original"]);
  });

  it("a key that is not a UUID is refused with IDEMPOTENCY_KEY_INVALID before anything runs", async () => {
    const t = tenant();
    const create = creator(t, "never");
    const uuid = randomUUID();
    for (const key of [
      "",
      "not-a-uuid",
      uuid.replaceAll("-", ""),
      `${uuid}\n`,
      ` ${uuid}`,
      `${uuid}0`,
      uuid.replace(/^./, "g"),
    ]) {
      expect(
        await reasonOf(runIdempotent(db, scopeOf(t, { key }), thingCodec, create.work)),
        JSON.stringify(key),
      ).to.equal("IDEMPOTENCY_KEY_INVALID");
      expect(() => assertIdempotencyKey(key), JSON.stringify(key)).to.throw(DomainError);
    }
    expect(create.runs).to.equal(0);
    expect(await keysOf(t)).to.deep.equal([]);
    expect(() => assertIdempotencyKey(uuid)).not.to.throw();
  });

  it("keys of different tenants or operations never meet", async () => {
    const [a, b] = [tenant(), tenant()];
    const key = randomUUID();
    const createA = creator(a, "for a");
    const createB = creator(b, "for b");
    const createRefund = creator(a, "refund for a");
    const ofA = await runIdempotent(db, scopeOf(a, { key }), thingCodec, createA.work);
    // Same key, another tenant, even with another request: a first call of its own.
    const ofB = await runIdempotent(
      db,
      scopeOf(b, { key, requestHash: requestFingerprint({ label: "b" }) }),
      thingCodec,
      createB.work,
    );
    const refund = await runIdempotent(
      db,
      scopeOf(a, { key, operation: "things.refund" }),
      thingCodec,
      createRefund.work,
    );
    expect([ofA.replayed, ofB.replayed, refund.replayed]).to.deep.equal([false, false, false]);
    expect([createA.runs, createB.runs, createRefund.runs]).to.deep.equal([1, 1, 1]);
    expect(await thingsOf(a)).to.deep.equal(["for a", "refund for a"]);
    expect(await thingsOf(b)).to.deep.equal(["for b"]);
    expect(
      await runIdempotent(
        db,
        scopeOf(b, { key, requestHash: requestFingerprint({ label: "b" }) }),
        thingCodec,
        createB.work,
      ),
    ).to.deep.equal({
      result: ofB.result,
      replayed: true,
    });
  });

  it("keys of different principals never meet: none claims, replays, probes or blocks another's", async () => {
    const t = tenant();
    const key = randomUUID();
    const ofMember = creator(t, "member's");
    const ofOther = creator(t, "other's");
    const ofService = creator(t, "service's");
    const member = await runIdempotent(db, scopeOf(t, { key, principal: "user:7" }), thingCodec, ofMember.work);
    // The same key from another user, with another request: a first call of its own, not a 422 about the member's.
    const other = await runIdempotent(
      db,
      scopeOf(t, { key, principal: "user:8", requestHash: requestFingerprint({ label: "b" }) }),
      thingCodec,
      ofOther.work,
    );
    expect(
      await findIdempotentResult(db, scopeOf(t, { key, principal: "service:orders" }), thingCodec),
      "nothing to find under another principal",
    ).to.equal(undefined);
    const service = await runIdempotent(
      db,
      scopeOf(t, { key, principal: "service:orders" }),
      thingCodec,
      ofService.work,
    );
    expect([member.replayed, other.replayed, service.replayed]).to.deep.equal([false, false, false]);
    expect(await thingsOf(t)).to.deep.equal(["member's", "other's", "service's"]);
    // Each replays its own, and resolving under one principal voids nothing of another's.
    expect(await runIdempotent(db, scopeOf(t, { key, principal: "user:7" }), thingCodec, ofMember.work)).to.deep.equal({
      result: member.result,
      replayed: true,
    });
    expect(
      await resolveIdempotencyKey(db, scopeOf(t, { key, principal: "service:payments" }), thingCodec),
    ).to.deep.equal({ voided: true });
    expect(await resolveIdempotencyKey(db, scopeOf(t, { key, principal: "service:orders" }), thingCodec)).to.deep.equal(
      { result: service.result },
    );
    expect(
      await runIdempotent(
        db,
        scopeOf(t, { key, principal: "user:8", requestHash: requestFingerprint({ label: "b" }) }),
        thingCodec,
        ofOther.work,
      ),
    ).to.deep.equal({ result: other.result, replayed: true });
  });

  it("a key stored before keys had principals replays only to a principal the scope says owns it", async () => {
    const t = tenant();
    const key = randomUUID();
    const stored: Thing = { id: 41, label: "stored before" };
    // As the table held it before the principal column: migrated rows have the principal ''.
    await db.query(
      `INSERT INTO idempotency_keys (tenant_id, principal, operation, key, request_hash, response) VALUES ($1, '', 'things.create', $2, $3, $4)`,
      [t, key, requestFingerprint({ label: "a" }), thingCodec.encode(stored)],
    );
    const owner = scopeOf(t, { key, principal: "user:1", ownsUnscoped: (thing) => thing?.label === "stored before" });
    expect(await runIdempotent(db, owner, thingCodec, creator(t, "again").work)).to.deep.equal({
      result: stored,
      replayed: true,
    });
    expect(await findIdempotentResult(db, owner, thingCodec)).to.deep.equal(stored);
    expect(
      await reasonOf(
        runIdempotent(
          db,
          { ...owner, requestHash: requestFingerprint({ label: "b" }) },
          thingCodec,
          creator(t, "other").work,
        ),
      ),
    ).to.equal("IDEMPOTENCY_KEY_REUSED");
    expect(await resolveIdempotencyKey(db, owner, thingCodec)).to.deep.equal({ result: stored });
    // Not theirs (or no rule given): the old key is invisible, and the same key is a first call of their own.
    const stranger = creator(t, "stranger's");
    expect(
      (
        await runIdempotent(
          db,
          scopeOf(t, {
            key,
            principal: "user:2",
            ownsUnscoped: () => false,
            requestHash: requestFingerprint({ label: "b" }),
          }),
          thingCodec,
          stranger.work,
        )
      ).replayed,
    ).to.equal(false);
    expect(
      (await runIdempotent(db, scopeOf(t, { key, principal: "user:3" }), thingCodec, creator(t, "third").work))
        .replayed,
    ).to.equal(false);
    expect(await thingsOf(t)).to.deep.equal(["stranger's", "third"]);
    // A voided key stored before: the owner's answer is still "voided".
    const voidedKey = randomUUID();
    await db.query(
      `INSERT INTO idempotency_keys (tenant_id, principal, operation, key, request_hash) VALUES ($1, '', 'things.create', $2, '!voided')`,
      [t, voidedKey],
    );
    expect(
      await resolveIdempotencyKey(
        db,
        scopeOf(t, { key: voidedKey, principal: "service:orders", ownsUnscoped: (thing) => thing === undefined }),
        thingCodec,
      ),
    ).to.deep.equal({ voided: true });
    expect(
      await reasonOf(
        runIdempotent(
          db,
          scopeOf(t, { key: voidedKey, principal: "service:orders", ownsUnscoped: (thing) => thing === undefined }),
          thingCodec,
          creator(t, "late").work,
        ),
      ),
    ).to.equal("IDEMPOTENCY_KEY_VOIDED");
  });

  it("when the work throws, nothing is kept: the error passes through and a retry runs the work", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const boom = new Error("card declined");
    let runs = 0;
    const failing = async (tx: SqlExecutor): Promise<Thing> => {
      runs++;
      await tx.query("INSERT INTO things (tenant_id, label) VALUES ($1, 'half')", [t]);
      throw boom;
    };
    const err = await runIdempotent(db, scope, thingCodec, failing).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.equal(boom);
    expect(runs).to.equal(1);
    expect(await keysOf(t)).to.deep.equal([]);
    expect(await thingsOf(t)).to.deep.equal([]);

    // The key is free again, even for another request.
    const retry = creator(t, "retried");
    const outcome = await runIdempotent(
      db,
      { ...scope, requestHash: requestFingerprint({ label: "c" }) },
      thingCodec,
      retry.work,
    );
    expect(outcome.replayed).to.equal(false);
    expect(retry.runs).to.equal(1);
    expect(await thingsOf(t)).to.deep.equal(["retried"]);
  });

  it("25 concurrent calls with one key create exactly one thing; the others replay it, or — while it is in flight — get IDEMPOTENCY_KEY_IN_FLIGHT at once", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const create = creator(t, "raced", 200);
    const started = Date.now();
    const settled = await Promise.allSettled(
      Array.from({ length: 25 }, () => runIdempotent(db, scope, thingCodec, create.work)),
    );
    expect(create.runs).to.equal(1);
    expect(await thingsOf(t)).to.deep.equal(["raced"]);
    const outcomes = settled.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
    const refused = settled.flatMap((o) => (o.status === "rejected" ? [(o.reason as DomainError).reason] : []));
    expect(outcomes.filter((o) => !o.replayed)).to.have.length(1);
    const winner = outcomes.find((o) => !o.replayed);
    for (const o of outcomes) expect(o.result).to.deep.equal(winner?.result);
    expect(new Set(refused), "a refusal only ever says the first is in flight").to.satisfy(
      (reasons: Set<string | undefined>) => [...reasons].every((r) => r === "IDEMPOTENCY_KEY_IN_FLIGHT"),
    );
    if (dbs.target.sharedOpens) {
      // On a server the calls really run at once: those that met the first in flight were told at
      // once, not made to wait for its 200 ms.
      expect(refused.length, "some met the first in flight").to.be.above(0);
    } else {
      // Embedded storage runs one transaction at a time: each later call finds the first done.
      expect(refused).to.deep.equal([]);
    }
    expect(Date.now() - started).to.be.below(5_000);
    // Once it is done, the same key replays.
    expect(await runIdempotent(db, scope, thingCodec, create.work)).to.deep.equal({
      result: winner!.result,
      replayed: true,
    });
  });

  it("resolveIdempotencyKey answers the stored result of a finished call, and changes nothing", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    const first = await runIdempotent(db, scope, thingCodec, creator(t, "made").work);
    expect(await resolveIdempotencyKey(db, scope, thingCodec)).to.deep.equal({ result: first.result });
    expect(await runIdempotent(db, scope, thingCodec, creator(t, "never").work)).to.deep.equal({
      result: first.result,
      replayed: true,
    });
    expect(await thingsOf(t)).to.deep.equal(["made"]);
  });

  it("resolveIdempotencyKey voids an unused key for good: a later call with it runs nothing, whatever its request", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    expect(await resolveIdempotencyKey(db, scope, thingCodec)).to.deep.equal({ voided: true });
    expect(await resolveIdempotencyKey(db, scope, thingCodec), "the answer is final").to.deep.equal({ voided: true });
    const late = creator(t, "late");
    expect(await reasonOf(runIdempotent(db, scope, thingCodec, late.work))).to.equal("IDEMPOTENCY_KEY_VOIDED");
    expect(
      await reasonOf(
        runIdempotent(db, { ...scope, requestHash: requestFingerprint({ label: "z" }) }, thingCodec, late.work),
      ),
    ).to.equal("IDEMPOTENCY_KEY_VOIDED");
    expect(await reasonOf(findIdempotentResult(db, scope, thingCodec))).to.equal("IDEMPOTENCY_KEY_VOIDED");
    expect(late.runs).to.equal(0);
    expect(await thingsOf(t)).to.deep.equal([]);
    // Another tenant's or operation's key of the same value is untouched.
    expect(
      (await runIdempotent(db, scopeOf(tenant(), { key: scope.key }), thingCodec, creator(t, "other tenant").work))
        .replayed,
    ).to.equal(false);
    expect(
      (await runIdempotent(db, { ...scope, operation: "things.refund" }, thingCodec, creator(t, "other op").work))
        .replayed,
    ).to.equal(false);
  });

  it("resolveIdempotencyKey racing a first call still in flight waits for it: never void for work that commits", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    // The work holds its transaction open while the resolve arrives.
    const running = runIdempotent(db, scope, thingCodec, creator(t, "slow", 300).work);
    await sleep(50);
    const resolved = await resolveIdempotencyKey(db, scope, thingCodec);
    const outcome = await running;
    expect(resolved).to.deep.equal({ result: outcome.result });
    expect(await thingsOf(t)).to.deep.equal(["slow"]);
  });

  it("findIdempotentResult reads a finished call's result without claiming anything; another request is refused", async () => {
    const t = tenant();
    const scope = scopeOf(t);
    expect(await findIdempotentResult(db, scope, thingCodec)).to.equal(undefined);
    expect(await keysOf(t), "reading claimed nothing").to.deep.equal([]);
    const first = await runIdempotent(db, scope, thingCodec, creator(t, "found").work);
    expect(await findIdempotentResult(db, scope, thingCodec)).to.deep.equal(first.result);
    expect(
      await reasonOf(
        findIdempotentResult(db, { ...scope, requestHash: requestFingerprint({ label: "b" }) }, thingCodec),
      ),
    ).to.equal("IDEMPOTENCY_KEY_REUSED");
  });

  it("purgeIdempotencyKeys forgets only keys older than the limit, which frees them", async () => {
    const t = tenant();
    const scopes = Array.from({ length: 5 }, () => scopeOf(t));
    for (const scope of scopes) await runIdempotent(db, scope, thingCodec, creator(t, "kept").work);
    const [old1, old2, almost] = scopes;
    const age = async (scope: IdempotencyScope<Thing> | undefined, interval: string) =>
      db.query(`UPDATE idempotency_keys SET created_at = now() - $2::interval WHERE tenant_id = $1 AND key = $3`, [
        t,
        interval,
        scope?.key,
      ]);
    await age(old1, "25 hours");
    await age(old2, "30 days");
    await age(almost, "23 hours");
    const dayMs = 24 * 60 * 60 * 1000;

    expect(await purgeIdempotencyKeys(db, dayMs)).to.equal(2);
    const left = (await keysOf(t)).map((k) => k.key).sort();
    expect(left).to.deep.equal(
      scopes
        .slice(2)
        .map((s) => s.key)
        .sort(),
    );
    expect(await purgeIdempotencyKeys(db, dayMs), "nothing more is old enough").to.equal(0);

    const again = creator(t, "after purge");
    expect((await runIdempotent(db, old1!, thingCodec, again.work)).replayed).to.equal(false);
    expect(again.runs).to.equal(1);
    expect((await runIdempotent(db, almost!, thingCodec, again.work)).replayed).to.equal(true);
  });

  it("purges on one replica at a time: while another holds the purge, it skips instead of waiting", async function () {
    if (db.engine !== "postgres") {
      console.log("      (skipped on embedded PGlite: one process, whose transactions never overlap)");
      return this.skip();
    }
    const t = tenant();
    const scope = scopeOf(t);
    await runIdempotent(db, scope, thingCodec, creator(t, "old").work);
    await db.query(`UPDATE idempotency_keys SET created_at = now() - interval '2 days' WHERE tenant_id = $1`, [t]);
    let release = () => {};
    let held = () => {};
    const holding = new Promise<void>((resolve) => (held = resolve));
    // Another replica in the middle of its purge: the same lock, held in its transaction.
    const other = db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
        `switchyard.purge-idempotency-keys.${db.schema}`,
      ]);
      held();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await holding;
    const started = Date.now();
    expect(await purgeIdempotencyKeys(db, 24 * 3_600_000), "skipped").to.equal(undefined);
    expect(Date.now() - started, "without waiting for the other").to.be.below(1_000);
    expect((await keysOf(t)).length, "the key is still there").to.equal(1);
    release();
    await other;
    expect(await purgeIdempotencyKeys(db, 24 * 3_600_000), "its turn now").to.be.at.least(1);
    expect((await keysOf(t)).length).to.equal(0);
  });
});

describe("requestFingerprint", () => {
  it("does not depend on the order of the fields", () => {
    expect(requestFingerprint({ amount: 100n, currency: "EUR", capture: true })).to.equal(
      requestFingerprint({ capture: true, currency: "EUR", amount: 100n }),
    );
  });

  it("changes with any value, name or field", () => {
    const base = { amount: 100n, currency: "EUR", source: "tok_1" };
    const variants: Record<string, string | bigint>[] = [
      { ...base, amount: 101n },
      { ...base, currency: "USD" },
      { ...base, source: "tok_2" },
      { amount: 100n, currency: "EUR", sourcE: "tok_1" },
      { amount: 100n, currency: "EUR" },
      { ...base, extra: "" },
      { ...base, source: 'tok_1"&x="' },
    ];
    const prints = new Set([base, ...variants].map((fields) => requestFingerprint(fields)));
    expect(prints.size).to.equal(variants.length + 1);
  });

  it("does not let a value spill into the next field", () => {
    expect(requestFingerprint({ a: "1&b=2" })).not.to.equal(requestFingerprint({ a: "1", b: "2" }));
    expect(requestFingerprint({ a: "", b: "x" })).not.to.equal(requestFingerprint({ a: "x", b: "" }));
  });

  it("is a stable, compact hash", () => {
    const print = requestFingerprint({ amount: 1 });
    expect(print).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(requestFingerprint({ amount: 1 })).to.equal(print);
  });
});

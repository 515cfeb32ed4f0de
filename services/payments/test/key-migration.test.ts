// Idempotency-Keys stored before keys had principals keep replaying after the migration that scopes
// them (payments' migration 3), to whoever the stored payment shows made them — the user it belongs
// to, an admin of the tenant, or the orders workflow for an order's payment — and to nobody else: a
// member cannot reach another member's old key, nor orders' old keys. Run on the engines that keep
// their data between opens (a data directory, the server), since the migration runs at an open.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import type { Caller } from "@switchyard/platform/caller.js";
import { principalOf, servicePrincipal } from "@switchyard/platform/caller.js";
import { requestFingerprint } from "@switchyard/platform/idempotency-keys.js";
import { jsonResultCodec } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { ownsUnscopedPayment } from "../src/domain/access.js";
import { paymentsMigrations } from "../src/store/migrations.js";
import type { PaymentRecord } from "../src/store/port.js";
import { SqlPaymentsStore } from "../src/store/sql-store.js";

const BEFORE_PRINCIPALS = paymentsMigrations.filter((m) => m.version < 3);
const member = (userId: bigint): Caller => ({
  tenantId: "acme",
  userId,
  role: "member",
  sessionId: "s",
  expiresAt: 0,
  token: "t",
});
const admin: Caller = { ...member(1n), role: "admin" };
const ORDERS: Caller = { ...member(2n), service: "orders" };

forEachDatabase("payments: keys stored before principals, after the migration", (dbs) => {
  if (!dbs.target.persistent) return;

  it("replay to the principal the stored payment shows, and to nobody else", async () => {
    const place = dbs.place();
    const old = await place.open(BEFORE_PRINCIPALS);
    const codec = jsonResultCodec<PaymentRecord>();
    /** A payment and its key as the code before principals stored them (keys per tenant). */
    const storedBefore = async (id: string, ownerUserId: bigint, reference: string) => {
      const key = randomUUID();
      const { rows } = await old.query<{ created_at: Date }>(
        `INSERT INTO payments (id, tenant_id, amount, currency, source, owner_user_id, reference) VALUES ($1, 'acme', 500, 'EUR', 'tok_visa', $2, $3) RETURNING created_at`,
        [id, ownerUserId, reference],
      );
      const record: PaymentRecord = {
        id,
        tenantId: "acme",
        amount: 500n,
        currency: "EUR",
        source: "tok_visa",
        amountRefunded: 0n,
        ownerUserId,
        reference,
        createdAt: rows[0]!.created_at,
      };
      const requestHash = requestFingerprint({
        amount: 500n,
        currency: "EUR",
        source: "tok_visa",
        ...(reference === "" ? {} : { owner: ownerUserId, reference }),
      });
      await old.query(
        `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash, response) VALUES ('acme', 'payments.create', $1, $2, $3)`,
        [key, requestHash, codec.encode(record)],
      );
      return { key, requestHash, record };
    };
    const bobs = await storedBefore("pay_bobsBEFOREprincipals", 3n, "");
    const orders = await storedBefore("pay_ordersBEFOREprincipal", 3n, "order:9");
    const voidedKey = randomUUID();
    await old.query(
      `INSERT INTO idempotency_keys (tenant_id, operation, key, request_hash) VALUES ('acme', 'payments.create', $1, '!voided')`,
      [voidedKey],
    );
    await old.close();

    const store = new SqlPaymentsStore(await place.open(paymentsMigrations));
    const replayFor = (caller: Caller, stored: { key: string; requestHash: string }) =>
      store.createPayment(
        "acme",
        {
          principal: principalOf(caller),
          key: stored.key,
          requestHash: stored.requestHash,
          ownsUnscoped: (p) => ownsUnscopedPayment(caller, p),
        },
        { amount: 500n, currency: "EUR", source: "tok_visa", ownerUserId: caller.userId, reference: "" },
      );

    const bobAgain = await replayFor(member(3n), bobs);
    expect([bobAgain.replayed, bobAgain.result.id], "its owner's retry replays it").to.deep.equal([
      true,
      bobs.record.id,
    ]);
    expect((await replayFor(admin, bobs)).result.id, "as to an admin, who saw it before too").to.equal(bobs.record.id);
    const stranger = await replayFor(member(4n), bobs);
    expect(
      [stranger.replayed, stranger.result.id === bobs.record.id],
      "another member: a payment of their own",
    ).to.deep.equal([false, false]);
    expect((await replayFor(member(4n), orders)).replayed, "nor orders' old key").to.equal(false);

    // Orders' own old keys: its in-flight steps still settle by them after the upgrade.
    const resolve = (key: string) =>
      store.resolvePaymentKey("acme", {
        principal: servicePrincipal("orders"),
        key,
        ownsUnscoped: (p) => ownsUnscopedPayment({ service: "orders" }, p),
      });
    expect(await resolve(orders.key)).to.deep.equal({ result: orders.record });
    expect(await resolve(voidedKey)).to.deep.equal({ voided: true });
    expect((await replayFor(ORDERS, orders)).result.id, "a retry of orders' old call").to.equal(orders.record.id);
    expect(await resolve(bobs.key), "a member's old key is not orders'").to.deep.equal({ voided: true });
    expect((await replayFor(member(3n), bobs)).result.id, "and voiding it in orders' scope left bob's alone").to.equal(
      bobs.record.id,
    );
  });
});

// Payments' events for partners are written with the change they report, on every store adapter:
// a payment or refund that commits has exactly one event carrying it (payment.succeeded,
// refund.succeeded), a replay adds none, and one whose transaction fails — whenever — has none.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { PaymentSchema, RefundSchema } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { unrelayedEvents, type SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { CommitFailed, failingCommits } from "../../platform/test/support/failing-commits.js";
import { refundAmount } from "../src/domain/payments.js";
import { paymentToProto, refundToProto } from "../src/proto-mapping.js";
import { paymentsMigrations } from "../src/store/migrations.js";
import { SqlPaymentsStore } from "../src/store/sql-store.js";

forEachDatabase("payments outbox", (dbs) => {
  let db: SqlDatabase;
  before(async () => {
    db = await dbs.open(paymentsMigrations);
  });

  // Each test its own tenant: its events are the ones of that tenant.
  const newTenant = () => `t-${randomBytes(4).toString("hex")}`;
  const eventsOf = async (tenantId: string) =>
    (await unrelayedEvents(db, 10_000)).filter((e) => e.tenantId === tenantId);
  const keyed = () => ({ principal: "user:1", key: randomUUID(), requestHash: "h" });
  const pay = (store: SqlPaymentsStore, tenantId: string, key = keyed()) =>
    store.createPayment(tenantId, key, {
      amount: 1000n,
      currency: "EUR",
      source: "tok_visa",
      ownerUserId: 1n,
      reference: "",
    });
  const refund = (store: SqlPaymentsStore, tenantId: string, paymentId: string, amount: bigint) =>
    store.createRefund(tenantId, keyed(), { paymentId, reason: "" }, (p) => refundAmount(p, amount));

  it("records payment.succeeded with the payment as answered, once: a replay of the key records nothing", async () => {
    const tenant = newTenant();
    const store = new SqlPaymentsStore(db);
    const key = keyed();
    const { result } = await pay(store, tenant, key);
    expect((await pay(store, tenant, key)).replayed).to.equal(true);
    const events = await eventsOf(tenant);
    expect(events.map((e) => e.type)).to.deep.equal(["payment.succeeded"]);
    expect(fromBinary(PaymentSchema, events[0]!.resource)).to.deep.equal(paymentToProto(result));
  });

  it("records refund.succeeded with the refund; a refused refund records nothing", async () => {
    const tenant = newTenant();
    const store = new SqlPaymentsStore(db);
    const { result: payment } = await pay(store, tenant);
    const { result: made } = await refund(store, tenant, payment.id, 400n);
    const refused = await refund(store, tenant, payment.id, 700n).catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(DomainError);
    const events = await eventsOf(tenant);
    expect(events.map((e) => e.type)).to.deep.equal(["payment.succeeded", "refund.succeeded"]);
    expect(fromBinary(RefundSchema, events[1]!.resource)).to.deep.equal(refundToProto(made));
  });

  it("records nothing when the transaction fails after the change was written, and the key stays unused", async () => {
    const tenant = newTenant();
    const key = keyed();
    const failing = new SqlPaymentsStore(failingCommits(db));
    expect(await pay(failing, tenant, key).catch((err: unknown) => err)).to.be.instanceOf(CommitFailed);
    expect(await eventsOf(tenant)).to.deep.equal([]);
    const { result, replayed } = await pay(new SqlPaymentsStore(db), tenant, key);
    expect(replayed, "nothing was kept under the key").to.equal(false);
    const failedRefund = await refund(failing, tenant, result.id, 100n).catch((err: unknown) => err);
    expect(failedRefund).to.be.instanceOf(CommitFailed);
    expect((await eventsOf(tenant)).map((e) => e.type)).to.deep.equal(["payment.succeeded"]);
  });

  it("has, after concurrent payments and refunds some of whose commits fail, exactly one event per committed change and none else", async () => {
    const tenant = newTenant();
    let n = 0;
    // Every third transaction fails at its commit.
    const store = new SqlPaymentsStore(failingCommits(db, () => ++n % 3 === 0));
    const payments = await Promise.allSettled(Array.from({ length: 24 }, () => pay(store, tenant)));
    const made = payments.flatMap((p) => (p.status === "fulfilled" ? [p.value.result] : []));
    const refunds = await Promise.allSettled(made.map((p) => refund(store, tenant, p.id, 10n)));
    for (const outcome of [...payments, ...refunds])
      if (outcome.status === "rejected") expect(outcome.reason).to.be.instanceOf(CommitFailed);

    const { rows: committedPayments } = await db.query<{ id: string }>(`SELECT id FROM payments WHERE tenant_id = $1`, [
      tenant,
    ]);
    const { rows: committedRefunds } = await db.query<{ id: string }>(`SELECT id FROM refunds WHERE tenant_id = $1`, [
      tenant,
    ]);
    expect(committedPayments.length).to.be.within(1, 23);
    const events = await eventsOf(tenant);
    const reported = (type: string, decode: (bytes: Uint8Array) => { id: string }) =>
      events
        .filter((e) => e.type === type)
        .map((e) => decode(e.resource).id)
        .sort();
    expect(reported("payment.succeeded", (b) => fromBinary(PaymentSchema, b))).to.deep.equal(
      committedPayments.map((r) => r.id).sort(),
    );
    expect(reported("refund.succeeded", (b) => fromBinary(RefundSchema, b))).to.deep.equal(
      committedRefunds.map((r) => r.id).sort(),
    );
    expect(new Set(events.map((e) => e.id)).size).to.equal(events.length);
  });
});

// Orders' events for partners are written with the status change they report, on every store
// adapter: paid, shipped and cancelled (at once, or once a refund settles) each record one event
// carrying the order as it became; a step that moved no money, or a change whose commit fails, none.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { OrderSchema, OrderStatus } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { unrelayedEvents, type SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { CommitFailed, failingCommits } from "../../platform/test/support/failing-commits.js";
import { stepIdempotencyKey, type StepKind } from "../src/domain/steps.js";
import { orderToProto } from "../src/proto-mapping.js";
import { ordersMigrations } from "../src/store/migrations.js";
import type { OrderRecord } from "../src/store/port.js";
import { SqlOrdersStore } from "../src/store/sql-store.js";

const STEP_KEY_SECRET = randomBytes(32);

forEachDatabase("orders outbox", (dbs) => {
  let db: SqlDatabase;
  let store: SqlOrdersStore;
  before(async () => {
    db = await dbs.open(ordersMigrations);
    store = new SqlOrdersStore(db);
  });

  // Each test its own tenant: its events are the ones of that tenant.
  const newTenant = () => `t-${randomBytes(4).toString("hex")}`;
  const eventsOf = async (tenantId: string) =>
    (await unrelayedEvents(db, 10_000))
      .filter((e) => e.tenantId === tenantId)
      .map((e) => ({ type: e.type, order: fromBinary(OrderSchema, e.resource) }));

  const newOrder = async (tenantId: string) =>
    (
      await store.createOrder(
        tenantId,
        2n,
        { currency: "EUR", note: "", items: [{ sku: "MUG-1", quantity: 1n, unitPrice: 900n }] },
        undefined,
      )
    ).result;
  const startStep = async (on: SqlOrdersStore, order: OrderRecord, step: StepKind) =>
    (
      await on.act(order.tenantId, order.id, (o) => ({
        kind: "step",
        step,
        amount: 900n,
        currency: "EUR",
        paymentId: o.paymentId,
        keyFor: (n) =>
          stepIdempotencyKey(STEP_KEY_SECRET, { tenantId: o.tenantId, orderId: o.id, kind: step, attempt: n }),
        deadlineMs: 60_000,
      }))
    ).step!;
  const paid = async (order: OrderRecord) =>
    (await store.settleStep(await startStep(store, order, "charge"), { moved: true, paymentId: "pay_x", note: "" }))!;
  const ship = (on: SqlOrdersStore, order: OrderRecord) =>
    on.act(order.tenantId, order.id, () => ({
      kind: "transition",
      to: "shipped",
      shipment: { carrier: "DHL", trackingNumber: "1Z" },
    }));

  it("records order.paid and order.shipped, each with the order as the change left it; creating one records nothing", async () => {
    const tenant = newTenant();
    const order = await newOrder(tenant);
    expect(await eventsOf(tenant)).to.deep.equal([]);
    const afterPay = await paid(order);
    const { order: afterShip } = await ship(store, afterPay);
    expect(await eventsOf(tenant)).to.deep.equal([
      { type: "order.paid", order: orderToProto(afterPay) },
      { type: "order.shipped", order: orderToProto(afterShip) },
    ]);
    expect(afterShip.shipments).to.have.length(1);
  });

  it("records order.cancelled for a pending order cancelled at once, and for a paid one once its refund settles", async () => {
    const tenant = newTenant();
    const { order: cancelledAtOnce } = await store.act(tenant, (await newOrder(tenant)).id, () => ({
      kind: "transition",
      to: "cancelled",
    }));
    const afterPay = await paid(await newOrder(tenant));
    const refund = await startStep(store, afterPay, "refund");
    expect(
      (await eventsOf(tenant)).map((e) => e.type),
      "not before the refund settles",
    ).to.deep.equal(["order.cancelled", "order.paid"]);
    const refunded = (await store.settleStep(refund, { moved: true, refundId: "re_x", note: "" }))!;
    const events = await eventsOf(tenant);
    expect(events.map((e) => [e.type, e.order.id])).to.deep.equal([
      ["order.cancelled", cancelledAtOnce.id],
      ["order.paid", afterPay.id],
      ["order.cancelled", afterPay.id],
    ]);
    expect(events[2]!.order).to.deep.equal(orderToProto(refunded));
    expect(events[2]!.order.status).to.equal(OrderStatus.CANCELLED);
  });

  it("records nothing for a step that moved no money, nor for a status change whose commit fails", async () => {
    const tenant = newTenant();
    const order = await newOrder(tenant);
    const step = await startStep(store, order, "charge");
    await store.settleStep(step, { moved: false, note: "declined" });
    const failing = new SqlOrdersStore(failingCommits(db));
    const again = await startStep(store, order, "charge");
    expect(
      await failing.settleStep(again, { moved: true, paymentId: "pay_y", note: "" }).catch((e: unknown) => e),
    ).to.be.instanceOf(CommitFailed);
    expect(await eventsOf(tenant)).to.deep.equal([]);
    const afterPay = (await store.settleStep(again, { moved: true, paymentId: "pay_y", note: "" }))!;
    expect(await ship(failing, afterPay).catch((e: unknown) => e)).to.be.instanceOf(CommitFailed);
    expect((await store.getOrder(tenant, order.id))!.status, "the failed ship changed nothing").to.equal("paid");
    expect((await eventsOf(tenant)).map((e) => e.type)).to.deep.equal(["order.paid"]);
  });
});

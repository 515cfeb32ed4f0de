// The reconciler on a real engine: one replica at a time holds its lease (taken back at once by the
// same holder, by another once it runs out or is handed back), it settles only steps past their
// deadline, a failed settle leaves the step for the next pass, and a step is settled once.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "@switchyard/platform/logger.js";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { stepIdempotencyKey } from "../src/domain/steps.js";
import { ordersMigrations } from "../src/store/migrations.js";
import { SqlOrdersStore } from "../src/store/sql-store.js";
import type { StepRecord } from "../src/store/port.js";
import type { MoneySteps } from "../src/workflow/money-steps.js";
import { Reconciler } from "../src/workflow/reconciler.js";

const STEP_KEY_SECRET = randomBytes(32);

const logger = createLogger("test", "silent");

/** Stands in for MoneySteps.resolve: settles as "nothing moved" (or fails while `failing`), counting calls. */
function resolver(store: SqlOrdersStore) {
  const seen: bigint[] = [];
  const fake = {
    failing: false,
    seen,
    steps: {
      async resolve(step: StepRecord) {
        seen.push(step.id);
        if (fake.failing) throw new Error("payments is unreachable");
        return store.settleStep(step, { moved: false, note: "test" });
      },
    } as unknown as MoneySteps,
  };
  return fake;
}

forEachDatabase("orders reconciler", (dbs) => {
  let store: SqlOrdersStore;
  before(async () => {
    store = new SqlOrdersStore(await dbs.open(ordersMigrations));
  });

  /** A pending order with a charge step that is due now (or in `deadlineMs`). */
  async function orderWithStep(deadlineMs = 0) {
    const { result: order } = await store.createOrder(
      "acme",
      2n,
      { currency: "EUR", note: "", items: [{ sku: "MUG-1", quantity: 1n, unitPrice: 900n }] },
      undefined,
    );
    const { step } = await store.act("acme", order.id, (o) => ({
      kind: "step",
      step: "charge",
      amount: 900n,
      currency: "EUR",
      paymentId: "",
      keyFor: (n) =>
        stepIdempotencyKey(STEP_KEY_SECRET, { tenantId: "acme", orderId: o.id, kind: "charge", attempt: n }),
      deadlineMs,
    }));
    return step!;
  }

  it("lets one holder at a time take the lease; the same holder renews it; a released or expired one passes on", async () => {
    const name = `lease-${Math.random()}`;
    expect(await store.takeLease(name, "a", 60_000)).to.equal(true);
    expect(await store.takeLease(name, "b", 60_000)).to.equal(false);
    expect(await store.takeLease(name, "a", 60_000), "renewed by its holder").to.equal(true);
    await store.releaseLease(name, "b");
    expect(await store.takeLease(name, "b", 60_000), "only its holder releases it").to.equal(false);
    await store.releaseLease(name, "a");
    expect(await store.takeLease(name, "b", 200)).to.equal(true);
    await sleep(300);
    expect(await store.takeLease(name, "a", 60_000), "expired").to.equal(true);
  });

  it("settles due steps in the replica that holds the lease only, leaves steps not yet due, and settles each once", async () => {
    const due = await orderWithStep(0);
    const later = await orderWithStep(60_000);
    await sleep(20);
    const a = resolver(store);
    const b = resolver(store);
    const first = new Reconciler({ store, steps: a.steps, logger, intervalMs: 60_000, holder: "replica-a" });
    const second = new Reconciler({ store, steps: b.steps, logger, intervalMs: 60_000, holder: "replica-b" });
    try {
      expect(await first.runOnce()).to.be.at.least(1);
      expect(await second.runOnce(), "the other replica waits for the lease").to.equal(0);
      expect(a.seen).to.include(due.id).and.not.include(later.id);
      expect(b.seen).to.deep.equal([]);
      expect((await store.getStep(due.id))!.state).to.equal("failed");
      expect((await store.getStep(later.id))!.state, "not due yet").to.equal("pending");
      const before = a.seen.length;
      await first.runOnce();
      expect(a.seen.slice(before), "a settled step is not taken again").to.not.include(due.id);
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  it("keeps a step it could not settle for the next pass, and a stopped replica hands the lease over", async () => {
    const step = await orderWithStep(0);
    await sleep(20);
    const a = resolver(store);
    a.failing = true;
    const first = new Reconciler({ store, steps: a.steps, logger, intervalMs: 60_000, holder: "replica-c" });
    await first.runOnce();
    expect(a.seen).to.include(step.id);
    expect((await store.getStep(step.id))!.state, "still unsettled").to.equal("pending");
    await first.stop();
    const b = resolver(store);
    const second = new Reconciler({ store, steps: b.steps, logger, intervalMs: 60_000, holder: "replica-d" });
    try {
      await second.runOnce();
      expect(b.seen, "the next replica took over at once").to.include(step.id);
      expect((await store.getStep(step.id))!.state).to.equal("failed");
    } finally {
      await second.stop();
    }
  });

  it("records a step's outcome once, with the status change it brings", async () => {
    const step = await orderWithStep(60_000);
    const paid = await store.settleStep(step, { moved: true, paymentId: "pay_test", note: "charged" });
    expect([paid!.status, paid!.paymentId, paid!.stepInProgress]).to.deep.equal(["paid", "pay_test", undefined]);
    expect(await store.settleStep(step, { moved: false, note: "late" }), "already settled").to.equal(undefined);
    const stored = (await store.getStep(step.id))!;
    expect([stored.state, stored.paymentId, stored.outcome]).to.deep.equal(["succeeded", "pay_test", "charged"]);
    expect(stored.settledAt).to.be.instanceOf(Date);
  });
});

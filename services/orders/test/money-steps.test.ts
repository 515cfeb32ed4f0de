// A money step believes only an answer that is the step's: a payment or refund payments answers —
// from the call or by looking the key up after a deadline — that is not what the step asked for
// (amount, currency, reference, owner; payment, currency, at most the amount) never marks an order
// paid or cancelled. The step fails safe ("nothing moved"), an error is logged and the mismatch
// counted. On a real store (PGlite); payments stands in here, answering what no honest payments
// service can since keys have principals — the defence must hold anyway.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import {
  PaymentSchema,
  RefundSchema,
  type Payment,
  type PaymentService,
  type Refund,
} from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import type { Caller } from "@switchyard/platform/caller.js";
import { errorInfoOf, fail } from "@switchyard/platform/errors.js";
import type { Client } from "@switchyard/platform/grpc";
import { createLogger } from "@switchyard/platform/logger.js";
import { moneyStepMismatches } from "@switchyard/platform/metrics.js";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { ordersMigrations } from "../src/store/migrations.js";
import { SqlOrdersStore } from "../src/store/sql-store.js";
import { MoneySteps } from "../src/workflow/money-steps.js";

const bob: Caller = {
  tenantId: "acme",
  userId: 2n,
  role: "member",
  sessionId: "s",
  expiresAt: 2_000_000_000,
  token: "t",
};
const ctx = {
  timeoutMs: () => 5_000,
  signal: new AbortController().signal,
  requestHeader: new Headers(),
} as unknown as HandlerContext;

/** What the stand-in payments answers next. */
interface Answers {
  charge?: () => Payment;
  refund?: () => Refund;
  resolved?: () =>
    { case: "payment"; value: Payment } | { case: "refund"; value: Refund } | { case: "voided"; value: true };
}

describe("money steps: an answer is believed only when it is the step's", () => {
  let db: SqlDatabase;
  let store: SqlOrdersStore;
  let answers: Answers;
  const errors: string[] = [];
  let steps: MoneySteps;

  before(async () => {
    db = await openSqlDatabase({ schema: "orders", migrations: ordersMigrations });
    store = new SqlOrdersStore(db);
    const payments = {
      createPayment: async () => ({ payment: answers.charge!(), replayed: false }),
      createRefund: async () => ({ refund: answers.refund!(), replayed: false }),
      resolveIdempotencyKey: async () => ({ outcome: answers.resolved!() }),
    } as unknown as Client<typeof PaymentService>;
    const logger = createLogger("test", "silent");
    logger.error = ((_obj: object, message: string) => void errors.push(message)) as typeof logger.error;
    steps = new MoneySteps({
      store,
      payments,
      credentials: new ServiceCredentials(async () => ({ token: "orders-token", expiresInSeconds: 900 })),
      logger,
      stepKeySecret: randomBytes(32),
    });
  });
  after(async () => db?.close());
  beforeEach(() => {
    answers = {};
    errors.length = 0;
  });

  /** A pending order of bob's for 75,000 (50 × 1,500). */
  async function pendingOrder() {
    return (
      await store.createOrder(
        "acme",
        bob.userId,
        { currency: "EUR", note: "", items: [{ sku: "BOOK-1", quantity: 50n, unitPrice: 1_500n }] },
        undefined,
      )
    ).result;
  }
  const charge = (
    orderId: bigint,
    fields: Partial<Pick<Payment, "amount" | "currency" | "reference" | "ownerUserId">> = {},
  ) =>
    create(PaymentSchema, {
      id: `pay_${randomBytes(8).toString("hex")}`,
      amount: 75_000n,
      currency: "EUR",
      reference: `order:${orderId}`,
      ownerUserId: bob.userId,
      ...fields,
    });
  const mismatches = async (step: string) =>
    (await moneyStepMismatches.get()).values.find((v) => v.labels.step === step)?.value ?? 0;
  const reasonOf = (promise: Promise<unknown>) =>
    promise.then(
      () => "resolved",
      (err: unknown) => (err instanceof ConnectError ? (errorInfoOf(err)?.reason ?? Code[err.code]) : String(err)),
    );

  it("the charge as the step asked is believed: the order is paid with it", async () => {
    const order = await pendingOrder();
    const payment = charge(order.id);
    answers.charge = () => payment;
    const { order: paid, paymentId } = await steps.pay(bob, order.id, "tok_visa", ctx);
    expect([paid.status, paid.paymentId, paymentId]).to.deep.equal(["paid", payment.id, payment.id]);
  });

  for (const [what, fields] of [
    ["a 1-cent payment", { amount: 1n }],
    ["another currency", { currency: "USD" }],
    ["no reference", { reference: "" }],
    ["another order's reference", { reference: "order:999999" }],
    ["another owner", { ownerUserId: 3n }],
  ] as const) {
    it(`a charge answered with ${what} is not believed: the order stays pending, the step failed, logged and counted`, async () => {
      const order = await pendingOrder();
      answers.charge = () => charge(order.id, fields);
      const before = await mismatches("charge");
      expect(await reasonOf(steps.pay(bob, order.id, "tok_visa", ctx))).to.equal("INTERNAL");
      const now = (await store.getOrder("acme", order.id))!;
      expect([now.status, now.paymentId, now.stepInProgress]).to.deep.equal(["pending", "", undefined]);
      expect(await mismatches("charge")).to.equal(before + 1);
      expect(errors.join("\n")).to.match(/not the step's/);
    });
  }

  it("a charge cut off by its deadline, looked up and found to be someone else's 1-cent payment, is not believed", async () => {
    const order = await pendingOrder();
    answers.charge = () => {
      throw fail("DEADLINE_EXCEEDED", "deadline exceeded");
    };
    answers.resolved = () => ({
      case: "payment",
      value: charge(order.id, { amount: 1n, reference: "", ownerUserId: 3n }),
    });
    const before = await mismatches("charge");
    expect(await reasonOf(steps.pay(bob, order.id, "tok_visa", ctx))).to.equal("DEADLINE_EXCEEDED");
    const now = (await store.getOrder("acme", order.id))!;
    expect([now.status, now.paymentId, now.stepInProgress], "settled as nothing moved").to.deep.equal([
      "pending",
      "",
      undefined,
    ]);
    expect(await mismatches("charge")).to.equal(before + 1);
    // A new attempt, answered honestly, pays the order.
    const payment = charge(order.id);
    answers.charge = () => payment;
    expect((await steps.pay(bob, order.id, "tok_visa", ctx)).order.paymentId).to.equal(payment.id);
  });

  it("a refund of another payment, or of more than the step's amount, is not believed: the order stays paid", async () => {
    const order = await pendingOrder();
    const payment = charge(order.id);
    answers.charge = () => payment;
    await steps.pay(bob, order.id, "tok_visa", ctx);
    const refund = (fields: Partial<Pick<Refund, "paymentId" | "amount" | "currency">>) =>
      create(RefundSchema, {
        id: `re_${randomBytes(8).toString("hex")}`,
        paymentId: payment.id,
        amount: 75_000n,
        currency: "EUR",
        ...fields,
      });
    const before = await mismatches("refund");
    for (const [what, fields] of [
      ["another payment", { paymentId: "pay_someoneelse" }],
      ["more than the charge", { amount: 75_001n }],
      ["another currency", { currency: "USD" }],
    ] as const) {
      answers.refund = () => refund(fields);
      expect(await reasonOf(steps.cancel(bob, order.id, ctx)), what).to.equal("INTERNAL");
      const now = (await store.getOrder("acme", order.id))!;
      expect([now.status, now.refundId, now.stepInProgress]).to.deep.equal(["paid", "", undefined]);
    }
    expect(await mismatches("refund")).to.equal(before + 3);
    const honest = refund({});
    answers.refund = () => honest;
    expect((await steps.cancel(bob, order.id, ctx)).order.status).to.equal("cancelled");
  });

  it("a refusal about orders' own key reaches the user without naming a key", async () => {
    const order = await pendingOrder();
    answers.charge = () => {
      throw fail("IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was already used with a different request body");
    };
    const err = await steps.pay(bob, order.id, "tok_visa", ctx).then(
      () => undefined,
      (e: unknown) => e as ConnectError,
    );
    expect(errorInfoOf(err!)?.reason).to.equal("INTERNAL");
    expect(err!.rawMessage).to.not.match(/idempotency/i);
    expect((await store.getOrder("acme", order.id))!.status).to.equal("pending");
  });
});

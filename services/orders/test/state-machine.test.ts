// The pure rules of orders: every transition of the state machine, and totals.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { DomainError } from "@switchyard/platform/domain-error.js";
import {
  guardContentsChange,
  guardTransition,
  refuseStatusWrite,
  type OrderAction,
  type OrderStatus,
} from "../src/domain/state-machine.js";
import {
  checkDiscount,
  guardRoomForDiscount,
  MAX_DISCOUNTS,
  priceItems,
  totalsOf,
  validateItem,
} from "../src/domain/orders.js";
import {
  chargeMismatch,
  guardNoStepInProgress,
  refundMismatch,
  stepCallMs,
  stepIdempotencyKey,
} from "../src/domain/steps.js";
import { movedNoMoney } from "../src/workflow/call-outcome.js";
import { canSeeOrder, requireListOf, requireOrderAdmin, visibleOrder } from "../src/domain/access.js";
import { Code } from "@connectrpc/connect";
import { fail } from "@switchyard/platform/errors.js";
import type { Caller } from "@switchyard/platform/caller.js";

const STATUSES: OrderStatus[] = ["pending", "paid", "shipped", "cancelled"];
const ALLOWED: Record<OrderAction, Partial<Record<OrderStatus, OrderStatus>>> = {
  pay: { pending: "paid" },
  ship: { paid: "shipped" },
  cancel: { pending: "cancelled", paid: "cancelled" },
};

function reasonOf(fn: () => unknown): {
  reason: string | undefined;
  message: string;
  details: Readonly<Record<string, string>>;
} {
  try {
    fn();
  } catch (err) {
    // A rule refuses with the catalogue's reason as a plain error: no transport in the domain.
    expect(err).to.be.instanceOf(DomainError);
    const { reason, message, details } = err as DomainError;
    return { reason, message, details };
  }
  return expect.fail("expected a refusal");
}

describe("order state machine", () => {
  for (const action of Object.keys(ALLOWED) as OrderAction[]) {
    for (const from of STATUSES) {
      const to = ALLOWED[action][from];
      it(`${action} from ${from} → ${to ?? "409 naming the current state"}`, () => {
        if (to) expect(guardTransition(action, from)).to.equal(to);
        else {
          const refusal = reasonOf(() => guardTransition(action, from));
          expect(refusal.reason).to.equal("INVALID_STATE");
          expect(refusal.message).to.include(`is ${from}`);
        }
      });
    }
  }

  it("changes items and discounts only while pending", () => {
    expect(() => guardContentsChange("pending")).to.not.throw();
    for (const s of ["paid", "shipped", "cancelled"] as const)
      expect(reasonOf(() => guardContentsChange(s)).reason).to.equal("INVALID_STATE");
  });

  it("refuses a status write by naming the actions, and no public API's path", () => {
    const refusal = reasonOf(() => refuseStatusWrite());
    expect(refusal.reason).to.equal("RULE_VIOLATION");
    expect(refusal.details).to.deep.equal({ field: "status" });
    expect(refusal.message).to.include("pay, ship, cancel").and.not.match(/\/v\d/);
  });
});

describe("order totals", () => {
  it("sums items and subtracts discounts", () => {
    expect(
      totalsOf(
        [
          { quantity: 2n, unitPrice: 1500n },
          { quantity: 1n, unitPrice: 99n },
        ],
        [{ amount: 500n }],
      ),
    ).to.deep.equal({ subtotal: 3099n, discountTotal: 500n, total: 2599n });
  });
  it("refuses zero or negative quantity, negative price, and a discount beyond the total", () => {
    expect(reasonOf(() => validateItem({ sku: "A", quantity: 0n, expectedUnitPrice: 1n })).reason).to.equal(
      "RULE_VIOLATION",
    );
    expect(reasonOf(() => validateItem({ sku: "A", quantity: -1n, expectedUnitPrice: 1n })).reason).to.equal(
      "RULE_VIOLATION",
    );
    expect(reasonOf(() => validateItem({ sku: "A", quantity: 1n, expectedUnitPrice: -1n })).reason).to.equal(
      "RULE_VIOLATION",
    );
    expect(() => validateItem({ sku: "A", quantity: 1n, expectedUnitPrice: 0n })).to.not.throw();
    expect(() => validateItem({ sku: "A", quantity: 1n, expectedUnitPrice: undefined })).to.not.throw();
    expect(reasonOf(() => checkDiscount({ subtotal: 100n, discountTotal: 0n, total: 100n }, 101n)).reason).to.equal(
      "RULE_VIOLATION",
    );
    expect(() => checkDiscount({ subtotal: 100n, discountTotal: 0n, total: 100n }, 100n)).to.not.throw();
    expect(() => guardRoomForDiscount(new Array(MAX_DISCOUNTS - 1))).to.not.throw();
    expect(reasonOf(() => guardRoomForDiscount(new Array(MAX_DISCOUNTS))).reason, "the 101st discount").to.equal(
      "RULE_VIOLATION",
    );
  });
});

describe("prices from the catalog", () => {
  const catalog = new Map([
    ["BOOK-1", { price: 1500n, currency: "EUR" }],
    ["MUG-US", { price: 900n, currency: "USD" }],
  ]);
  const item = (sku: string, expectedUnitPrice?: bigint) => ({ sku, quantity: 2n, expectedUnitPrice });

  it("takes the catalog's price whether or not the client sent one that matches", () => {
    expect(priceItems([item("BOOK-1"), item("BOOK-1", 1500n)], catalog, "EUR")).to.deep.equal([
      { sku: "BOOK-1", quantity: 2n, unitPrice: 1500n },
      { sku: "BOOK-1", quantity: 2n, unitPrice: 1500n },
    ]);
  });
  it("refuses a price the catalog does not have with PRICE_CHANGED carrying the current price", () => {
    let err: DomainError | undefined;
    try {
      priceItems([item("BOOK-1", 1n)], catalog, "EUR");
    } catch (e) {
      err = e as DomainError;
    }
    expect(err!.reason).to.equal("PRICE_CHANGED");
    expect(err!.details).to.deep.equal({ sku: "BOOK-1", unit_price: "1500", currency: "EUR" });
  });
  it("refuses an unknown sku and one sold in another currency", () => {
    expect(reasonOf(() => priceItems([item("NOPE")], catalog, "EUR")).reason).to.equal("UNKNOWN_SKU");
    expect(reasonOf(() => priceItems([item("MUG-US")], catalog, "EUR")).reason).to.equal("CURRENCY_MISMATCH");
  });
});

describe("money steps", () => {
  const secret = randomBytes(32);

  it("derive the key from the order and the attempt under orders' secret: another attempt, order, kind, tenant or secret is another key", () => {
    const key = stepIdempotencyKey(secret, { tenantId: "acme", orderId: 7n, kind: "charge", attempt: 1 });
    expect(key).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(stepIdempotencyKey(secret, { tenantId: "acme", orderId: 7n, kind: "charge", attempt: 1 })).to.equal(key);
    for (const other of [
      stepIdempotencyKey(secret, { tenantId: "acme", orderId: 7n, kind: "charge", attempt: 2 }),
      stepIdempotencyKey(secret, { tenantId: "acme", orderId: 8n, kind: "charge", attempt: 1 }),
      stepIdempotencyKey(secret, { tenantId: "acme", orderId: 7n, kind: "refund", attempt: 1 }),
      stepIdempotencyKey(secret, { tenantId: "globex", orderId: 7n, kind: "charge", attempt: 1 }),
      stepIdempotencyKey(randomBytes(32), { tenantId: "acme", orderId: 7n, kind: "charge", attempt: 1 }),
    ]) {
      expect(other).to.not.equal(key);
    }
  });

  it("believe a payment only when it is the step's charge: amount, currency, reference and owner", () => {
    const step = { orderId: 7n, amount: 7_500_000n, currency: "EUR" };
    const charge = { amount: 7_500_000n, currency: "EUR", reference: "order:7", ownerUserId: 2n };
    expect(chargeMismatch(step, 2n, charge)).to.equal(undefined);
    expect(chargeMismatch(step, 2n, { ...charge, amount: 1n })).to.equal("amount");
    expect(chargeMismatch(step, 2n, { ...charge, currency: "USD" })).to.equal("currency");
    expect(chargeMismatch(step, 2n, { ...charge, reference: "" })).to.equal("reference");
    expect(chargeMismatch(step, 2n, { ...charge, reference: "order:70" })).to.equal("reference");
    expect(chargeMismatch(step, 3n, charge)).to.equal("owner");
    expect(chargeMismatch(step, 3n, { amount: 1n, currency: "USD", reference: "", ownerUserId: 2n })).to.equal(
      "amount, currency, reference, owner",
    );
  });

  it("believe a refund only when it is of the step's payment, in its currency, of at most the step's amount", () => {
    const step = { paymentId: "pay_a", amount: 900n, currency: "EUR" };
    expect(refundMismatch(step, { paymentId: "pay_a", amount: 900n, currency: "EUR" })).to.equal(undefined);
    expect(
      refundMismatch(step, { paymentId: "pay_a", amount: 400n, currency: "EUR" }),
      "what was left after an admin's partial refund",
    ).to.equal(undefined);
    expect(refundMismatch(step, { paymentId: "pay_b", amount: 900n, currency: "EUR" })).to.equal("payment");
    expect(refundMismatch(step, { paymentId: "pay_a", amount: 901n, currency: "EUR" })).to.equal("amount");
    expect(refundMismatch(step, { paymentId: "pay_a", amount: 900n, currency: "USD" })).to.equal("currency");
  });
  it("refuse every action while one is unsettled, naming it", () => {
    expect(() => guardNoStepInProgress({ stepInProgress: undefined })).to.not.throw();
    const refused = reasonOf(() => guardNoStepInProgress({ stepInProgress: "refund" }));
    expect(refused.reason).to.equal("STEP_IN_PROGRESS");
    expect(refused.message).to.include("cancellation");
  });
  it("count a refusal as moving no money, and a deadline, a lost connection or a crash as unknown", () => {
    expect(movedNoMoney(fail("RULE_VIOLATION", "x"))).to.equal(true);
    expect(movedNoMoney(fail("IDEMPOTENCY_KEY_VOIDED", "x"))).to.equal(true);
    expect(movedNoMoney(fail("LOAD_SHED", "x"))).to.equal(true);
    expect(movedNoMoney(new ConnectError("x", Code.DeadlineExceeded))).to.equal(false);
    expect(movedNoMoney(new ConnectError("x", Code.Unavailable))).to.equal(false);
    expect(movedNoMoney(new ConnectError("x", Code.Internal))).to.equal(false);
    expect(movedNoMoney(new ConnectError("x", Code.Aborted))).to.equal(false);
  });
  it("give the call the caller's remaining time, capped", () => {
    expect(stepCallMs(1_500)).to.equal(1_500);
    expect(stepCallMs(undefined)).to.equal(10_000);
    expect(stepCallMs(60_000)).to.equal(10_000);
  });
});

describe("who may act on orders", () => {
  const caller = (userId: bigint, role: "admin" | "member"): Caller => ({
    tenantId: "acme",
    userId,
    role,
    sessionId: "s",
    expiresAt: 0,
    token: "t",
  });
  const bobs = { userId: 2n };
  it("a member sees their own orders only; another member's is not found; an admin sees all", () => {
    expect(canSeeOrder(caller(2n, "member"), bobs)).to.equal(true);
    expect(canSeeOrder(caller(3n, "member"), bobs)).to.equal(false);
    expect(canSeeOrder(caller(1n, "admin"), bobs)).to.equal(true);
    expect(reasonOf(() => visibleOrder(caller(3n, "member"), bobs)).reason).to.equal("NOT_FOUND");
    expect(reasonOf(() => visibleOrder(caller(1n, "admin"), undefined)).reason).to.equal("NOT_FOUND");
  });
  it("shipments and discounts are the admins'; so are other users' order lists", () => {
    expect(reasonOf(() => requireOrderAdmin(caller(2n, "member"))).reason).to.equal("ROLE_REQUIRED");
    expect(() => requireOrderAdmin(caller(1n, "admin"))).to.not.throw();
    expect(() => requireListOf(caller(2n, "member"), 2n)).to.not.throw();
    expect(reasonOf(() => requireListOf(caller(2n, "member"), 3n)).reason).to.equal("ROLE_REQUIRED");
    expect(() => requireListOf(caller(1n, "admin"), 3n)).to.not.throw();
  });
});

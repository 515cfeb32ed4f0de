// The pure rules of orders: every transition of the state machine, and totals.
import { expect } from "chai";
import { ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform";
import { guardContentsChange, guardTransition, refuseStatusWrite, type OrderAction, type OrderStatus } from "../src/domain/state-machine.js";
import { checkDiscount, totalsOf, validateItem } from "../src/domain/orders.js";

const STATUSES: OrderStatus[] = ["pending", "paid", "shipped", "cancelled"];
const ALLOWED: Record<OrderAction, Partial<Record<OrderStatus, OrderStatus>>> = {
  pay: { pending: "paid" },
  ship: { paid: "shipped" },
  cancel: { pending: "cancelled", paid: "cancelled" },
};

function reasonOf(fn: () => unknown): { reason: string | undefined; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(ConnectError);
    return { reason: errorInfoOf(err as ConnectError)?.reason, message: (err as ConnectError).rawMessage };
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
    for (const s of ["paid", "shipped", "cancelled"] as const) expect(reasonOf(() => guardContentsChange(s)).reason).to.equal("INVALID_STATE");
  });

  it("refuses a status write by naming the action resources", () => {
    const refusal = reasonOf(() => refuseStatusWrite());
    expect(refusal.reason).to.equal("RULE_VIOLATION");
    expect(refusal.message).to.include("/cancel").and.include("/payment").and.include("/shipments");
  });
});

describe("order totals", () => {
  it("sums items and subtracts discounts", () => {
    expect(totalsOf([{ quantity: 2n, unitPrice: 1500n }, { quantity: 1n, unitPrice: 99n }], [{ amount: 500n }])).to.deep.equal({ subtotal: 3099n, discountTotal: 500n, total: 2599n });
  });
  it("refuses zero or negative quantity, negative price, and a discount beyond the total", () => {
    expect(reasonOf(() => validateItem({ sku: "A", quantity: 0n, unitPrice: 1n })).reason).to.equal("RULE_VIOLATION");
    expect(reasonOf(() => validateItem({ sku: "A", quantity: -1n, unitPrice: 1n })).reason).to.equal("RULE_VIOLATION");
    expect(reasonOf(() => validateItem({ sku: "A", quantity: 1n, unitPrice: -1n })).reason).to.equal("RULE_VIOLATION");
    expect(() => validateItem({ sku: "A", quantity: 1n, unitPrice: 0n })).to.not.throw();
    expect(reasonOf(() => checkDiscount({ subtotal: 100n, discountTotal: 0n, total: 100n }, 101n)).reason).to.equal("RULE_VIOLATION");
    expect(() => checkDiscount({ subtotal: 100n, discountTotal: 0n, total: 100n }, 100n)).to.not.throw();
  });
});

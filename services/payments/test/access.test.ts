// Who may set what on a payment (pure rules): a payment's `reference` ties it to an order, so only
// the orders workflow (its own service token beside the user's) may set it — not a user, and not any
// other internal service (the operator's included).
import { expect } from "chai";
import { DomainError } from "@switchyard/platform/domain-error.js";
import type { Caller } from "@switchyard/platform/caller.js";
import { validateReference } from "@switchyard/payments/domain/access.js";

const user: Caller = { tenantId: "acme", userId: 1n, role: "admin", sessionId: "s", expiresAt: 0, token: "t" };
const reasonOf = (work: () => unknown) => {
  try {
    work();
    return "accepted";
  } catch (err) {
    return err instanceof DomainError ? err.reason : String(err);
  }
};

describe("payments: who may set a reference", () => {
  it("the orders workflow may; a user (an admin too) and any other service may not", () => {
    expect(reasonOf(() => validateReference({ ...user, service: "orders" }, "order:42:charge:1"))).to.equal("accepted");
    expect(reasonOf(() => validateReference(user, "order:42:charge:1"))).to.equal("ROLE_REQUIRED");
    expect(reasonOf(() => validateReference({ ...user, service: "operator" }, "order:42:charge:1"))).to.equal(
      "ROLE_REQUIRED",
    );
  });

  it("an empty reference is no reference, whoever calls; a malformed one is refused", () => {
    expect(reasonOf(() => validateReference(user, ""))).to.equal("accepted");
    expect(reasonOf(() => validateReference({ ...user, service: "orders" }, "has space"))).to.equal("RULE_VIOLATION");
  });
});

// A new user's name (pure rules): whole (v1's full_name: all of it the given name — nobody guesses
// where a name splits) or in parts (v2's name: the whole is the parts joined by a space), never both.
import { expect } from "chai";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { validateName } from "@switchyard/identity/domain/users.js";

const refusal = (work: () => unknown) => {
  try {
    work();
    return undefined;
  } catch (err) {
    return err instanceof DomainError ? `${err.reason} ${err.details.field}` : String(err);
  }
};

describe("identity: a new user's name", () => {
  it("a whole name is all given name; parts make the whole joined by a space", () => {
    expect(validateName({ fullName: "  Grace Brewster Hopper " })).to.deep.equal({
      fullName: "Grace Brewster Hopper",
      name: { given: "Grace Brewster Hopper", family: "" },
    });
    expect(validateName({ fullName: "", givenName: " Ada ", familyName: "Lovelace" })).to.deep.equal({
      fullName: "Ada Lovelace",
      name: { given: "Ada", family: "Lovelace" },
    });
    expect(validateName({ fullName: "", givenName: "Plato", familyName: "" })).to.deep.equal({
      fullName: "Plato",
      name: { given: "Plato", family: "" },
    });
  });

  it("refuses both at once, an empty or control-character given name, a too-long part", () => {
    expect(
      refusal(() => validateName({ fullName: "Ada Lovelace", givenName: "Ada", familyName: "Lovelace" })),
    ).to.equal("RULE_VIOLATION full_name");
    expect(refusal(() => validateName({ fullName: "", givenName: "", familyName: "Lovelace" }))).to.equal(
      "RULE_VIOLATION name.given",
    );
    expect(refusal(() => validateName({ fullName: "", givenName: "A\u0007da", familyName: "" }))).to.equal(
      "RULE_VIOLATION name.given",
    );
    expect(refusal(() => validateName({ fullName: "", givenName: "Ada", familyName: "x".repeat(100) }))).to.equal(
      "RULE_VIOLATION name.family",
    );
    expect(refusal(() => validateName({ fullName: "" }))).to.equal("RULE_VIOLATION full_name");
  });
});

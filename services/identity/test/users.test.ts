// Identity's pure rules and its password hashing.
import { expect } from "chai";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { validateNewUser } from "../src/domain/users.js";
import { accessTokenClaims } from "../src/domain/tokens.js";
import { hashPassword, verifyPassword } from "../src/passwords.js";

function ruleBroken(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(DomainError);
    return (err as DomainError).details.field;
  }
  expect.fail("expected a rule violation");
}

describe("identity rules", () => {
  const valid = { email: "dana@acme.test", fullName: "Dana", password: "correct horse battery", role: undefined };

  it("accepts a valid user, defaulting the role to member and trimming", () => {
    expect(validateNewUser({ ...valid, email: " dana@acme.test ", fullName: " Dana " })).to.deep.equal({
      email: "dana@acme.test",
      fullName: "Dana",
      name: { given: "Dana", family: "" },
      password: valid.password,
      role: "member",
    });
  });

  it("names the field that breaks a rule", () => {
    expect(ruleBroken(() => validateNewUser({ ...valid, email: "no-at-sign" }))).to.equal("email");
    expect(ruleBroken(() => validateNewUser({ ...valid, email: "a@b" }))).to.equal("email");
    expect(ruleBroken(() => validateNewUser({ ...valid, fullName: "  " }))).to.equal("full_name");
    expect(ruleBroken(() => validateNewUser({ ...valid, fullName: "x\u0000y" }))).to.equal("full_name");
    expect(ruleBroken(() => validateNewUser({ ...valid, password: "short" }))).to.equal("password");
    expect(ruleBroken(() => validateNewUser({ ...valid, password: "x".repeat(257) }))).to.equal("password");
  });

  it("builds short-lived token claims for the tenant, subject and role", () => {
    const c = accessTokenClaims({ tenantId: "acme", userId: 12n, role: "admin", sessionId: "ses_x" }, 1000, 900);
    expect(c).to.include({ sub: "12", tid: "acme", role: "admin", sid: "ses_x", iat: 1000, exp: 1900 });
  });
});

describe("password hashing (Argon2id)", function () {
  this.timeout(10_000);
  it("verifies the right password only, with a fresh salt each time", async () => {
    const a = await hashPassword("demo-password");
    const b = await hashPassword("demo-password");
    expect(a).to.match(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(a).to.not.equal(b);
    expect(await verifyPassword("demo-password", a)).to.equal(true);
    expect(await verifyPassword("demo-passwore", a)).to.equal(false);
    expect(await verifyPassword("demo-password", "not-a-hash")).to.equal(false);
  });
});

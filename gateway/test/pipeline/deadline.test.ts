// Stage deadline: the default, or what the client asks for, never more than the maximum.
import { expect } from "chai";
import { askedTimeoutMs, deadlineStage } from "../../src/pipeline/deadline.js";
import { HttpError } from "../../src/runtime/errors.js";

describe("pipeline: deadline", () => {
  const deadline = deadlineStage(5_000, 30_000);

  it("gives a request that asks for none the default", () => {
    expect(deadline(undefined)).to.equal(5_000);
  });

  it("gives what the client asks for, shorter or longer than the default, up to the maximum", () => {
    expect(deadline(250)).to.equal(250);
    expect(deadline(20_000)).to.equal(20_000);
    expect(deadline(600_000)).to.equal(30_000);
  });

  it("reads X-Request-Timeout-Ms as whole milliseconds from 1", () => {
    expect(askedTimeoutMs(undefined)).to.equal(undefined);
    expect(askedTimeoutMs("1")).to.equal(1);
    expect(askedTimeoutMs("250")).to.equal(250);
    expect(askedTimeoutMs("999999999")).to.equal(999_999_999);
  });

  for (const bad of ["0", "-5", "1.5", "1e3", "0x10", " 10", "", "1234567890", "ten"]) {
    it(`refuses X-Request-Timeout-Ms "${bad}" with 400`, () => {
      expect(() => askedTimeoutMs(bad))
        .to.throw(HttpError)
        .with.property("status", 400);
    });
  }

  it("refuses X-Request-Timeout-Ms given twice with 400", () => {
    expect(() => askedTimeoutMs(["10", "20"]))
      .to.throw(HttpError)
      .with.property("status", 400);
  });
});

// The webhooks service's settings: issue 45's schedule by default, and a compressed one (the tests')
// only when it keeps a live holder's lease past its attempt's timeout.
import { expect } from "chai";
import { ConfigError } from "@switchyard/platform/config.js";
import { RETRY_SCHEDULE } from "../src/domain/retries.js";
import { webhooksConfigFrom } from "../src/service.js";

describe("webhooks settings", () => {
  it("default to 30 s doubling to 6 h for 3 days, 10 s attempts and a minute's lease", () => {
    const config = webhooksConfigFrom({});
    expect({
      firstRetryMs: config.retryFirstMs,
      longestWaitMs: config.retryLongestMs,
      giveUpAfterMs: config.giveUpAfterMs,
    }).to.deep.equal(RETRY_SCHEDULE);
    expect([config.attemptTimeoutMs, config.leaseMs, config.pollMs]).to.deep.equal([10_000, 60_000, 1_000]);
  });

  it("take a compressed schedule, and refuse a lease no longer than an attempt's timeout", () => {
    const config = webhooksConfigFrom({
      WEBHOOK_RETRY_FIRST_MS: "150",
      WEBHOOK_GIVE_UP_AFTER_MS: "1296000",
      WEBHOOK_ATTEMPT_TIMEOUT_MS: "2000",
      WEBHOOK_LEASE_MS: "3000",
    });
    expect([config.retryFirstMs, config.giveUpAfterMs, config.leaseMs]).to.deep.equal([150, 1_296_000, 3_000]);
    expect(() => webhooksConfigFrom({ WEBHOOK_LEASE_MS: "3000" }))
      .to.throw(ConfigError)
      .with.property("message")
      .that.matches(/WEBHOOK_LEASE_MS \(3000\) must be longer than WEBHOOK_ATTEMPT_TIMEOUT_MS \(10000\)/);
    expect(() => webhooksConfigFrom({ WEBHOOK_RETRY_FIRST_MS: "5000", WEBHOOK_RETRY_LONGEST_MS: "1000" })).to.throw(
      ConfigError,
    );
  });
});

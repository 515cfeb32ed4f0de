// Stage quota: its headers on every answer; past it 429, said to the access record, the place given back.
import { expect } from "chai";
import { EdgeCall } from "../../src/pipeline/edge-call.js";
import { quotaStage, rateLimitedMessage } from "../../src/pipeline/quota.js";
import { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { createRateLimiter, type RateLimiter } from "../../src/runtime/rate-limit.js";
import { ADDRESS, caller, record } from "./fixtures.js";

describe("pipeline: quota", () => {
  let limiter: RateLimiter;
  let quota: ReturnType<typeof quotaStage>;
  const call = (key = `addr:${ADDRESS}`) =>
    Object.assign(new EdgeCall(ADDRESS, record(), { "x-request-id": "req-1" }), { quotaKey: key });

  beforeEach(() => {
    limiter = createRateLimiter({
      limit: 2,
      windowSeconds: 60,
      keyPrefix: `quota-test-${process.pid}-${Math.random()}`,
    });
    quota = quotaStage(limiter, 2, 60);
  });
  afterEach(() => limiter.close());

  it("draws on the call's quota and puts it on the answer's headers, beside those gathered", async () => {
    const c = call();
    expect(quota.settle(c, await quota.ask(c, true))).to.equal(undefined);
    expect(c.headers["x-request-id"]).to.equal("req-1");
    expect(c.headers["x-ratelimit-limit"]).to.equal("2");
    expect(c.headers["x-ratelimit-remaining"]).to.equal("1");
    expect(c.headers["x-ratelimit-reset"]).to.match(/^\d+$/);
  });

  it("only reads the quota when asked not to draw", async () => {
    const c = call();
    for (let i = 0; i < 3; i++) expect((await quota.ask(c, false)).headers["x-ratelimit-remaining"]).to.equal("2");
  });

  it("refuses past the quota with 429 RATE_LIMITED and Retry-After, naming the address's quota in the access record", async () => {
    for (let i = 0; i < 2; i++) {
      const c = call();
      quota.settle(c, await quota.ask(c, true));
    }
    const c = call();
    const refusal = quota.settle(c, await quota.ask(c, true));
    expect(refusal?.status).to.equal(429);
    expect(refusal?.code).to.equal("RATE_LIMITED");
    expect(refusal?.message).to.equal(rateLimitedMessage(2, 60));
    expect(c.headers["retry-after"]).to.match(/^\d+$/);
    expect(c.headers["x-ratelimit-remaining"]).to.equal("0");
    expect(c.record.quotaKind).to.equal("address");
  });

  it("names the user's quota for a verified caller, and gives the call's place in the limit back", async () => {
    const concurrency = new AdaptiveConcurrencyLimit({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const key = "user:acme:7";
    for (let i = 0; i < 2; i++) await limiter.check(key);
    const c = call(key);
    c.caller = caller();
    c.release = concurrency.tryAcquire();
    expect(concurrency.inflight).to.equal(1);
    expect(quota.settle(c, await quota.ask(c, true))?.status).to.equal(429);
    expect(c.record.quotaKind).to.equal("user");
    expect(c.release).to.equal(undefined);
    expect(concurrency.inflight).to.equal(0);
  });
});

// Stage admit: a place in the concurrency limit or a shed, and the quota drawn only with a place.
import { expect } from "chai";
import { admissionStage } from "../../src/pipeline/admit.js";
import { EdgeCall } from "../../src/pipeline/edge-call.js";
import { quotaStage } from "../../src/pipeline/quota.js";
import { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { createRateLimiter, type RateLimiter } from "../../src/runtime/rate-limit.js";
import { ADDRESS, record } from "./fixtures.js";

describe("pipeline: admit", () => {
  let limiter: RateLimiter;
  let concurrency: AdaptiveConcurrencyLimit;
  let sheds: string[] = [];
  let admission: ReturnType<typeof admissionStage>;
  const call = () => Object.assign(new EdgeCall(ADDRESS, record(), {}), { quotaKey: `addr:${ADDRESS}` });

  beforeEach(() => {
    limiter = createRateLimiter({
      limit: 5,
      windowSeconds: 600,
      keyPrefix: `admit-test-${process.pid}-${Math.random()}`,
    });
    // A fixed limit of one request at a time.
    concurrency = new AdaptiveConcurrencyLimit({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    sheds = [];
    admission = admissionStage(concurrency, quotaStage(limiter, 5, 600), (priority) => sheds.push(priority));
  });
  afterEach(() => limiter.close());

  it("takes a place in the limit and draws one request on the quota", async () => {
    const c = call();
    const decision = await admission.admit(c);
    expect(c.release).to.be.a("function");
    expect(concurrency.inflight).to.equal(1);
    expect(decision.allowed).to.equal(true);
    expect(decision.headers["x-ratelimit-remaining"]).to.equal("4");
  });

  it("finds no place beyond the limit, and then only reads the quota: a shed request draws nothing", async () => {
    await admission.admit(call());
    for (let i = 0; i < 3; i++) {
      const c = call();
      const decision = await admission.admit(c);
      expect(c.release, "no place").to.equal(undefined);
      expect(decision.headers["x-ratelimit-remaining"], "the quota as it stands").to.equal("4");
    }
    expect(sheds, "counted only when the shed is answered").to.deep.equal([]);
  });

  it("sheds with 503 LOAD_SHED and Retry-After, counted each time by priority, one refusal for all", () => {
    const first = admission.shed(call());
    expect(first.status).to.equal(503);
    expect(first.code).to.equal("LOAD_SHED");
    expect(first.headers["retry-after"]).to.equal("1");
    const sheddable = Object.assign(call(), { priority: "sheddable" as const });
    expect(admission.shed(sheddable)).to.equal(first);
    expect(sheds).to.deep.equal(["default", "sheddable"]);
  });

  it("gives a place back once, however often asked", async () => {
    const c = call();
    await admission.admit(c);
    c.giveBackPlace(true);
    expect(c.release).to.equal(undefined);
    expect(concurrency.inflight).to.equal(0);
    c.giveBackPlace(true);
    expect(concurrency.inflight).to.equal(0);
    expect((await admission.admit(call())).allowed, "the place is free again").to.equal(true);
    expect(concurrency.inflight).to.equal(1);
  });
});

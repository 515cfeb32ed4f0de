// The adaptive concurrency limit on its own, with a fake clock.
import { expect } from "chai";
import { AdaptiveConcurrencyLimit } from "../src/runtime/concurrency-limit.js";

function drive(limit: AdaptiveConcurrencyLimit, rttMs: number, samples: number) {
  let now = 0;
  const clock = () => now;
  for (let i = 0; i < samples; i++) {
    const release = limit.tryAcquire(clock)!;
    now += rttMs;
    release(true);
  }
}

describe("adaptive concurrency limit", () => {
  it("admits up to the limit and sheds beyond it, until a slot is released", () => {
    const limit = new AdaptiveConcurrencyLimit({ initialLimit: 3, minLimit: 1, maxLimit: 10 });
    const held = [limit.tryAcquire(), limit.tryAcquire(), limit.tryAcquire()];
    expect(held.every(Boolean)).to.equal(true);
    expect(limit.tryAcquire()).to.equal(undefined);
    held[0]!(true);
    expect(limit.tryAcquire()).to.be.a("function");
    expect(limit.inflight).to.equal(3);
  });

  it("shrinks when latency stretches, never below the minimum, and grows back when it recovers", () => {
    const limit = new AdaptiveConcurrencyLimit({ initialLimit: 100, minLimit: 5, maxLimit: 200, window: 10 });
    drive(limit, 10, 500);
    const steady = limit.limit;
    drive(limit, 200, 300);
    const overloaded = limit.limit;
    expect(overloaded).to.be.lessThan(steady);
    expect(overloaded).to.be.at.least(5);
    drive(limit, 10, 2_000);
    expect(limit.limit).to.be.greaterThan(overloaded);
    expect(limit.limit).to.be.at.most(200);
  });

  it("does not learn from failed requests", () => {
    const limit = new AdaptiveConcurrencyLimit({ initialLimit: 10, minLimit: 1, maxLimit: 10, window: 1 });
    let now = 0;
    for (let i = 0; i < 100; i++) {
      const release = limit.tryAcquire(() => now)!;
      now += 1_000;
      release(false);
    }
    expect(limit.limit).to.equal(10);
  });
});

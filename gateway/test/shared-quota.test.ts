// The quota shared in Redis by gateway replicas (REDIS_URL): two limiters on one prefix are two
// replicas. A small quota is counted exactly, one round trip per draw; a key drawn fast under a large
// quota is answered mostly in memory from points reserved ahead — never admitted beyond the quota, and
// refused early by at most 1 % of it per replica; a used-up window is refused without Redis until it
// resets; a peek counts what a replica holds; without Redis the process's own counters answer.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { createRateLimiter, type RateLimiter } from "../src/runtime/rate-limit.js";
import { SharedQuota, type QuotaState } from "../src/runtime/shared-quota.js";
import { forgetRedisKeys } from "../../test/support/redis-keys.js";

const redisUrl = process.env.REDIS_URL;
const unusedInsurance = {
  draw: (): Promise<QuotaState> => Promise.reject(new Error("Redis failed")),
  peek: (): Promise<QuotaState> => Promise.reject(new Error("Redis failed")),
};

describe("the quota shared in Redis (REDIS_URL)", function () {
  this.timeout(20_000);
  const prefixes: string[] = [];
  const clients: Redis[] = [];
  const limiters: RateLimiter[] = [];
  const quotas: SharedQuota[] = [];
  const freshPrefix = () => {
    const prefix = `switchyard:test:quota:${randomBytes(4).toString("hex")}`;
    prefixes.push(prefix);
    return prefix;
  };
  /** `count` replicas of one quota (SharedQuota itself: its reservations can be counted). */
  const replicas = async (count: number, limit: number, windowSeconds = 60) => {
    const keyPrefix = freshPrefix();
    return Promise.all(
      Array.from({ length: count }, async () => {
        const redis = new Redis(redisUrl!);
        clients.push(redis);
        await redis.ping();
        const quota = new SharedQuota(redis, { limit, windowSeconds, keyPrefix, insurance: unusedInsurance });
        quotas.push(quota);
        return quota;
      }),
    );
  };

  before(function () {
    if (!redisUrl) {
      console.log("  (shared quota skipped: REDIS_URL is not set)");
      this.skip();
    }
  });
  after(async () => {
    for (const limiter of limiters) await limiter.close();
    for (const quota of quotas) quota.close();
    for (const redis of clients) await redis.quit();
    if (redisUrl) await forgetRedisKeys(redisUrl, prefixes);
  });

  it("counts a quota under 100 exactly across replicas: one round trip per draw, the same remaining whoever asks", async () => {
    const [first, second] = await replicas(2, 6);
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) {
      const state = await (i % 2 === 0 ? first! : second!).draw("user:acme:1");
      answers.push(`${state.allowed}:${state.remaining}`);
    }
    expect(answers).to.deep.equal(["true:5", "true:4", "true:3", "true:2", "true:1", "true:0", "false:0", "false:0"]);
    expect(first!.reservations + second!.reservations, "the refusals after the first are answered in memory").to.equal(
      7,
    );
  });

  it("never admits beyond a large quota under concurrent draws on two replicas, refuses at most 1 % early on each, and spares most round trips", async () => {
    const limit = 2_000;
    const [first, second] = await replicas(2, limit);
    const draws = Array.from({ length: 2_400 }, (_, i) => (i % 2 === 0 ? first! : second!).draw("user:acme:2"));
    const states = await Promise.all(draws);
    const admitted = states.filter((s) => s.allowed).length;
    expect(admitted, "never beyond the quota").to.be.at.most(limit);
    expect(admitted, "refused early by at most 1 % of the quota per replica").to.be.at.least(limit - 2 * (limit / 100));
    const roundTrips = first!.reservations + second!.reservations;
    expect(roundTrips, "most draws answered in memory").to.be.below(states.length / 4);
    for (const s of states.filter((s) => !s.allowed)) {
      expect(s.remaining).to.equal(0);
      expect(s.msBeforeReset).to.be.within(1, 60_000);
    }
  });

  it("holds back at most 1 % of the quota on a replica: what one drew fast and left, the other is refused early by no more", async () => {
    const limit = 1_000;
    const [first, second] = await replicas(2, limit);
    for (let i = 0; i < 500; i++) expect((await first!.draw("user:acme:4")).allowed).to.equal(true);
    expect(first!.reservations, "drawn fast, one replica reserves ahead").to.be.below(100);
    let admitted = 0;
    while ((await second!.draw("user:acme:4")).allowed) admitted++;
    expect(admitted).to.be.within(limit - 500 - limit / 100, limit - 500);
  });

  it("refuses a used-up window in memory until it resets, then counts the next window afresh", async () => {
    const [quota] = await replicas(1, 3, 1);
    for (let i = 0; i < 3; i++) expect((await quota!.draw("addr:192.0.2.90")).allowed).to.equal(true);
    const roundTrips = quota!.reservations;
    const refused = await quota!.draw("addr:192.0.2.90");
    expect(refused.allowed).to.equal(false);
    expect(refused.msBeforeReset).to.be.within(1, 1_000);
    expect((await quota!.draw("addr:192.0.2.90")).allowed).to.equal(false);
    expect(quota!.reservations, "the last reservation saw the window used up: the refusals asked nobody").to.equal(
      roundTrips,
    );
    await new Promise((resolve) => setTimeout(resolve, refused.msBeforeReset + 50));
    const next = await quota!.draw("addr:192.0.2.90");
    expect([next.allowed, next.remaining]).to.deep.equal([true, 2]);
  });

  it("peeks without drawing, counting the points this replica holds as still to be drawn", async () => {
    const keyPrefix = freshPrefix();
    const limiter = createRateLimiter({ limit: 300, windowSeconds: 60, redisUrl, keyPrefix });
    limiters.push(limiter);
    expect((await limiter.peek("user:acme:3")).headers["x-ratelimit-remaining"], "a fresh quota is whole").to.equal(
      "300",
    );
    // Drawn fast: the replica reserves ahead (1 % of 300: up to 3 points).
    const remaining: number[] = [];
    for (let i = 0; i < 40; i++)
      remaining.push(Number((await limiter.check("user:acme:3")).headers["x-ratelimit-remaining"]));
    expect(remaining, "one replica's own count goes down by one a draw").to.deep.equal(
      Array.from({ length: 40 }, (_, i) => 299 - i),
    );
    for (let i = 0; i < 3; i++)
      expect((await limiter.peek("user:acme:3")).headers["x-ratelimit-remaining"], "peeking draws nothing").to.equal(
        "260",
      );
  });

  it("answers from the process's own counters while Redis cannot be reached", async () => {
    const limiter = createRateLimiter({
      limit: 2,
      windowSeconds: 60,
      redisUrl: "redis://127.0.0.1:1",
      keyPrefix: freshPrefix(),
    });
    limiters.push(limiter);
    const decisions = [
      await limiter.check("addr:192.0.2.91"),
      await limiter.check("addr:192.0.2.91"),
      await limiter.check("addr:192.0.2.91"),
    ];
    expect(decisions.map((d) => `${d.allowed}:${d.headers["x-ratelimit-remaining"]}`)).to.deep.equal([
      "true:1",
      "true:0",
      "false:0",
    ]);
    expect(decisions[2]!.headers["retry-after"]).to.match(/^\d+$/);
    expect((await limiter.peek("addr:192.0.2.91")).allowed).to.equal(false);
  });
});

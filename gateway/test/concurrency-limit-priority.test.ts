// The adaptive concurrency limit by priority (issue 46), with a fake clock and a simulated upstream:
// sheddable work shed first, critical last; the limit taught by the lowest priority arriving only;
// one priority alone limited exactly as without priorities.
import { expect } from "chai";
import type { Priority } from "@switchyard/platform/priority.js";
import { AdaptiveConcurrencyLimit, type Release } from "../src/runtime/concurrency-limit.js";
import { seededRandom } from "../../test/support/seeded-random.js";

/** The gateway's defaults (GATEWAY_CONCURRENCY_INITIAL / MIN / MAX, buffer 50%). */
function limiter(clock: { now: number }): AdaptiveConcurrencyLimit {
  return new AdaptiveConcurrencyLimit({
    initialLimit: 100,
    minLimit: 3,
    maxLimit: 1_000,
    now: () => clock.now,
    random: () => 0.5,
  });
}

interface MixedLoad {
  /**
   * The upstream serves this many at once; more share it (latency = service × in upstream ÷ parallel).
   * With `seed`, it is `parallel` first-come first-served servers whose service times vary instead
   * (exponential, with the given means): an M/M/c queue.
   */
  parallel: number;
  seed?: number;
  /** Sheddable requests: open loop at `load` × the upstream's capacity for them. */
  sheddableMs: number;
  load: number;
  /** Critical requests: closed-loop clients; a shed one asks again 5 ms later. */
  criticalClients: number;
  criticalMs: number;
  durationMs: number;
  /** false: every request asks as default (priorities off). */
  priorities: boolean;
}

interface MixedResult {
  criticalAdmitted: number;
  criticalShed: number;
  sheddableAdmitted: number;
  sheddableShed: number;
  /** Admitted requests per ms, both kinds. */
  perMs: number;
  /** The limit as each sheddable request asked, second half of the run. */
  lateLimits: number[];
}

interface Pending {
  at: number;
  /** Set: an admitted request finishing; unset: a critical client asking. */
  release?: Release;
  critical: boolean;
}

function mixedLoad(limit: AdaptiveConcurrencyLimit, clock: { now: number }, load: MixedLoad): MixedResult {
  const result: MixedResult = {
    criticalAdmitted: 0,
    criticalShed: 0,
    sheddableAdmitted: 0,
    sheddableShed: 0,
    perMs: 0,
    lateLimits: [],
  };
  const start = clock.now;
  const end = start + load.durationMs;
  const interval = load.sheddableMs / load.parallel / load.load;
  // Kept in order of time: the next event first.
  const pending: Pending[] = [];
  const schedule = (event: Pending) => {
    let i = pending.length;
    while (i > 0 && pending[i - 1]!.at > event.at) i--;
    pending.splice(i, 0, event);
  };
  for (let i = 0; i < load.criticalClients; i++) schedule({ at: start + i * 0.1, critical: true });
  let inUpstream = 0;
  const random = load.seed === undefined ? undefined : seededRandom(load.seed);
  const freeAt = Array.from({ length: load.parallel }, () => start);
  const ask = (priority: Priority) => limit.tryAcquire(load.priorities ? priority : "default");
  const admit = (release: Release, serviceMs: number, critical: boolean) => {
    inUpstream++;
    let done = clock.now + serviceMs * Math.max(1, inUpstream / load.parallel);
    if (random) {
      const server = freeAt.indexOf(Math.min(...freeAt));
      done = Math.max(clock.now, freeAt[server]!) - Math.log(1 - random()) * serviceMs;
      freeAt[server] = done;
    }
    schedule({ at: done, release, critical });
  };
  let nextSheddable = start;
  for (;;) {
    const next = pending[0];
    if (next === undefined && nextSheddable > end) break;
    if (next === undefined || nextSheddable <= next.at) {
      if (nextSheddable > end) {
        // Past the end only what is in flight finishes.
        pending.splice(0, pending.length, ...pending.filter((p) => p.release));
        if (pending.length === 0) break;
        nextSheddable = Infinity;
        continue;
      }
      clock.now = nextSheddable;
      nextSheddable += interval;
      const release = ask("sheddable");
      if (clock.now - start > load.durationMs / 2) result.lateLimits.push(limit.limitFor("sheddable"));
      if (!release) result.sheddableShed++;
      else {
        result.sheddableAdmitted++;
        admit(release, load.sheddableMs, false);
      }
      continue;
    }
    pending.shift();
    clock.now = next.at;
    if (next.release) {
      inUpstream--;
      next.release(true);
      if (next.critical && clock.now <= end) schedule({ at: clock.now, critical: true });
      continue;
    }
    if (clock.now > end) continue;
    const release = ask("critical");
    if (!release) {
      result.criticalShed++;
      schedule({ at: clock.now + 5, critical: true });
    } else {
      result.criticalAdmitted++;
      admit(release, load.criticalMs, true);
    }
  }
  result.perMs = (result.criticalAdmitted + result.sheddableAdmitted) / load.durationMs;
  return result;
}

const criticalShare = (r: MixedResult) => r.criticalAdmitted / (r.criticalAdmitted + r.criticalShed);

describe("adaptive concurrency limit by priority", () => {
  const upstream = { parallel: 4, sheddableMs: 5, load: 3, durationMs: 20_000 };

  for (const { criticalClients, criticalMs } of [
    { criticalClients: 8, criticalMs: 5 },
    { criticalClients: 2, criticalMs: 15 },
  ]) {
    it(`sheddable work at 3× beside ${criticalClients} closed-loop critical clients (${criticalMs} ms each): ≥ 99 % of critical admitted, goodput as without priorities`, () => {
      const load = { ...upstream, criticalClients, criticalMs };
      const clockOff = { now: 0 };
      const off = mixedLoad(limiter(clockOff), clockOff, { ...load, priorities: false });
      const clockOn = { now: 0 };
      const on = mixedLoad(limiter(clockOn), clockOn, { ...load, priorities: true });
      expect(criticalShare(on), "critical admitted with priorities").to.be.at.least(0.99);
      expect(on.sheddableShed, "the overload is shed").to.be.greaterThan(0);
      expect(on.perMs, "goodput with priorities ÷ without").to.be.at.least(off.perMs * 0.99);
      if (criticalClients === 8)
        expect(criticalShare(off), "without priorities, critical is shed like the rest").to.be.below(0.9);
    });
  }

  it("the same against an M/M/32 upstream, whose latency varies: every critical client admitted in each of 4 runs, mean goodput as without priorities", () => {
    const goodput = { on: 0, off: 0 };
    for (const seed of [1, 2, 3, 7]) {
      const load = { ...upstream, parallel: 32, seed, criticalClients: 8, criticalMs: 5, durationMs: 10_000 };
      const clockOff = { now: 0 };
      goodput.off += mixedLoad(limiter(clockOff), clockOff, { ...load, priorities: false }).perMs;
      const clockOn = { now: 0 };
      const on = mixedLoad(limiter(clockOn), clockOn, { ...load, priorities: true });
      goodput.on += on.perMs;
      expect(criticalShare(on), `critical admitted with priorities, run ${seed}`).to.be.at.least(0.99);
      expect(on.perMs / (32 / 5), `goodput ÷ capacity, run ${seed}`).to.be.at.least(0.7);
    }
    expect(goodput.on, "goodput with priorities ÷ without, over the runs").to.be.at.least(goodput.off);
  });

  it("while shedding, cuts sheddable off at the limit, default a quarter of the initial limit above, critical twice that", () => {
    const clock = { now: 0 };
    const limit = limiter(clock);
    mixedLoad(limit, clock, { ...upstream, criticalClients: 0, criticalMs: 5, durationMs: 5_000, priorities: true });
    expect(limit.shedding).to.equal(true);
    const base = limit.limitFor("sheddable");
    expect(base).to.equal(limit.limit);
    expect(limit.limitFor("default") - base).to.equal(25);
    expect(limit.limitFor("critical") - base).to.equal(50);
    // Once the load has gone and the limit forgot it, nothing is shed: every priority has the maximum.
    clock.now += 60_000;
    limit.tryAcquire("default")!(false);
    expect(limit.shedding).to.equal(false);
    for (const priority of ["sheddable", "default", "critical"] as const)
      expect(limit.limitFor(priority)).to.equal(1_000);
  });

  it("a fixed limit (GATEWAY_CONCURRENCY_* all equal) is a hard cap: every priority is shed alike at it", () => {
    for (const filler of ["sheddable", "default", "critical"] as const) {
      const fixed = new AdaptiveConcurrencyLimit({ initialLimit: 4, minLimit: 4, maxLimit: 4 });
      for (let i = 0; i < 4; i++) expect(fixed.tryAcquire(filler), `${filler} place ${i + 1}`).to.be.a("function");
      for (const priority of ["sheddable", "default", "critical"] as const)
        expect(fixed.tryAcquire(priority), `${priority} beside 4 ${filler}`).to.equal(undefined);
    }
  });

  it("one priority alone is limited exactly as without priorities", () => {
    const runs = (["default", "sheddable", "critical"] as const).map((priority) => {
      const clock = { now: 0 };
      const limit = limiter(clock);
      const limits: number[] = [];
      let admitted = 0;
      const pending: { at: number; release: Release }[] = [];
      for (let at = 0; at < 10_000; at += 1 / 2.4) {
        pending.sort((a, b) => a.at - b.at);
        while (pending.length > 0 && pending[0]!.at <= at) {
          const done = pending.shift()!;
          clock.now = done.at;
          done.release(true);
        }
        clock.now = at;
        const release = limit.tryAcquire(priority);
        limits.push(limit.sheddingLimit);
        if (release) {
          admitted++;
          pending.push({ at: at + 5 * Math.max(1, (pending.length + 1) / 4), release });
        }
      }
      return { admitted, limits };
    });
    expect(runs[0]!.admitted).to.be.greaterThan(0);
    expect(runs[1], "sheddable alone").to.deep.equal(runs[0]);
    expect(runs[2], "critical alone").to.deep.equal(runs[0]);
  });

  it("only the lowest priority arriving teaches the limit: slow critical requests beside sheddable ones do not cut it", () => {
    const clock = { now: 0 };
    const limit = limiter(clock);
    // Sheddable requests of 10 ms, two at a time, with a critical one of 200 ms beside each pair: the
    // median latency of the window would be the critical ones' if they taught the limit.
    for (let i = 0; i < 300; i++) {
      const a = limit.tryAcquire("sheddable")!;
      const b = limit.tryAcquire("sheddable")!;
      const c = limit.tryAcquire("critical")!;
      const d = limit.tryAcquire("critical")!;
      const e = limit.tryAcquire("critical")!;
      clock.now += 10;
      a(true);
      b(true);
      clock.now += 190;
      c(true);
      d(true);
      e(true);
    }
    expect(limit.minRtt, "the sheddable requests' latency").to.equal(10);
    expect(limit.sheddingLimit, "not cut").to.be.at.least(100);
  });
});

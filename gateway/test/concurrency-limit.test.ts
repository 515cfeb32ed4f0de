// The adaptive concurrency limit on its own, with a fake clock and a simulated upstream.
import { expect } from "chai";
import { AdaptiveConcurrencyLimit, type ConcurrencyLimitOptions, type Release } from "../src/runtime/concurrency-limit.js";

function limiter(options: Partial<ConcurrencyLimitOptions> & { clock: { now: number } }): AdaptiveConcurrencyLimit {
  const { clock, ...rest } = options;
  return new AdaptiveConcurrencyLimit({ initialLimit: 100, minLimit: 3, maxLimit: 1_000, now: () => clock.now, random: () => 0.5, ...rest });
}

/** Sequential requests of a fixed latency (no queue): each one sampled. */
function serial(limit: AdaptiveConcurrencyLimit, clock: { now: number }, rttMs: number, count: number): void {
  for (let i = 0; i < count; i++) {
    const release = limit.tryAcquire()!;
    expect(release, "a lone request is admitted").to.be.a("function");
    clock.now += rttMs;
    release(true);
  }
}

interface SimulationResult {
  admitted: number;
  shed: number;
  /** Latencies of admitted requests in the second half of the run. */
  lateLatencies: number[];
  limits: number[];
}

/**
 * `clients` closed-loop clients against an upstream that serves `parallel` requests at once in
 * `serviceMs` each and queues the rest (latency = serviceMs × max(1, in flight / parallel)).
 * A shed client tries again 5 ms later.
 */
function simulate(limit: AdaptiveConcurrencyLimit, clock: { now: number }, { clients, parallel, serviceMs, durationMs }: { clients: number; parallel: number; serviceMs: number; durationMs: number }): SimulationResult {
  const start = clock.now;
  const events: { at: number; release?: Release }[] = Array.from({ length: clients }, (_, i) => ({ at: start + i * 0.01 }));
  const result: SimulationResult = { admitted: 0, shed: 0, lateLatencies: [], limits: [] };
  let inUpstream = 0;
  while (events.length > 0) {
    events.sort((a, b) => a.at - b.at);
    const event = events.shift()!;
    clock.now = event.at;
    if (clock.now - start > durationMs) break;
    if (event.release) {
      inUpstream--;
      event.release(true);
      events.push({ at: clock.now });
      continue;
    }
    const release = limit.tryAcquire();
    if (!release) {
      result.shed++;
      events.push({ at: clock.now + 5 });
      continue;
    }
    result.admitted++;
    inUpstream++;
    const latency = serviceMs * Math.max(1, inUpstream / parallel);
    if (clock.now - start > durationMs / 2) result.lateLatencies.push(latency);
    result.limits.push(limit.limit);
    events.push({ at: clock.now + latency, release });
  }
  return result;
}

const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)]!;

describe("adaptive concurrency limit", () => {
  it("measures the latency without a queue first, admitting only the minimum, then opens to the initial limit", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, minRttSamples: 10 });
    expect(limit.measuringMinRtt).to.equal(true);
    const held = [limit.tryAcquire(), limit.tryAcquire(), limit.tryAcquire()];
    expect(held.every(Boolean), "three admitted").to.equal(true);
    expect(limit.tryAcquire(), "the fourth is shed while measuring").to.equal(undefined);
    clock.now += 5;
    held.forEach((release) => release!(true));
    serial(limit, clock, 5, 7);
    expect(limit.measuringMinRtt).to.equal(false);
    expect(limit.minRtt).to.equal(5);
    expect(limit.limit).to.equal(100);
    const many = Array.from({ length: 100 }, () => limit.tryAcquire());
    expect(many.every(Boolean)).to.equal(true);
    expect(limit.tryAcquire(), "the 101st is shed").to.equal(undefined);
    many[0]!(false);
    expect(limit.tryAcquire(), "a released slot is free again").to.be.a("function");
  });

  it("settles where requests stop queueing: 50 clients on an upstream that serves 4 at once keep latency near the unqueued one, the rest shed", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock });
    const run = simulate(limit, clock, { clients: 50, parallel: 4, serviceMs: 10, durationMs: 20_000 });
    expect(run.shed, "overload is shed").to.be.greaterThan(0);
    // Without the limit every request would wait behind 50: 125 ms. With it, close to the 10 ms the upstream needs.
    expect(p90(run.lateLatencies), "p90 latency of admitted requests").to.be.at.most(10 * 2.5);
    // Throughput stays near what the upstream can do (4 per 10 ms over the second half).
    expect(run.lateLatencies.length / 10_000, "admitted per ms").to.be.above(0.3);
    const settled = run.limits.slice(-200);
    expect(Math.max(...settled)).to.be.at.most(12);
    expect(Math.min(...settled)).to.be.at.least(3);
  });

  it("grows back while latency stays at the unqueued level, never beyond the maximum", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, initialLimit: 4, maxLimit: 40 });
    serial(limit, clock, 10, 25);
    expect(limit.limit).to.equal(4);
    // 40 clients, and the upstream serves 100 at once: no queue, so the limit climbs to the maximum.
    const run = simulate(limit, clock, { clients: 40, parallel: 100, serviceMs: 10, durationMs: 30_000 });
    expect(run.limits.at(-1)).to.equal(40);
    expect(limit.limit).to.equal(40);
  });

  it("does not grow while most of the limit goes unused, so a sudden burst meets a limit near the recent load", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, initialLimit: 10, maxLimit: 1_000, windowMs: 10 });
    // Two clients for a minute of windows where latency is at its best: the limit could double every window.
    simulate(limit, clock, { clients: 2, parallel: 100, serviceMs: 1, durationMs: 60_000 });
    expect(limit.limit, "held near the load, not grown to the maximum").to.be.at.most(10);
    // Then 200 clients at once: at most that many get in at the same time, the rest are shed.
    const burst = simulate(limit, clock, { clients: 200, parallel: 4, serviceMs: 1, durationMs: 5 });
    expect(Math.max(...burst.limits)).to.be.at.most(10);
    expect(burst.shed).to.be.at.least(190);
  });

  it("learns nothing from releases without a sample (failures, answers that never reached the upstream)", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, minRttSamples: 5 });
    for (let i = 0; i < 100; i++) {
      const release = limit.tryAcquire()!;
      clock.now += 1_000;
      release(false);
    }
    expect(limit.measuringMinRtt, "still waiting for real samples").to.equal(true);
    expect(limit.minRtt).to.equal(0);
  });

  it("does not count requests admitted before a measurement began (they queued) toward minRTT", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, minRttSamples: 5, minRttIntervalMs: 1_000, windowMs: 10 });
    serial(limit, clock, 2, 5);
    expect(limit.minRtt).to.equal(2);
    const early = Array.from({ length: 20 }, () => limit.tryAcquire()!);
    // Windows go by with fast requests until the interval (850–1150 ms, here 1000) starts a new measurement.
    while (!limit.measuringMinRtt) serial(limit, clock, 2, 1);
    clock.now += 500;
    early.forEach((release) => release(true)); // 500 ms: they waited in a queue
    expect(limit.measuringMinRtt).to.equal(true);
    serial(limit, clock, 3, 5);
    expect(limit.minRtt, "measured from requests admitted during the measurement only").to.equal(3);
  });

  it("measures again when the upstream got slower for good: the limit does not stay at the minimum", () => {
    const clock = { now: 0 };
    const limit = limiter({ clock, minRttSamples: 5, windowMs: 10 });
    serial(limit, clock, 1, 5);
    expect(limit.minRtt).to.equal(1);
    // From now on every request takes 40 ms however few are in flight (a slower database, say).
    const slow = simulate(limit, clock, { clients: 20, parallel: 1_000, serviceMs: 40, durationMs: 20_000 });
    expect(limit.minRtt, "re-measured").to.equal(40);
    expect(Math.min(...slow.limits.slice(-100)), "the limit recovered from the minimum").to.be.above(10);
  });
});

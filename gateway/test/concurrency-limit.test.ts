// The adaptive concurrency limit on its own, with a fake clock and a simulated upstream.
import { expect } from "chai";
import { AdaptiveConcurrencyLimit, type ConcurrencyLimitOptions, type Release } from "../src/runtime/concurrency-limit.js";

/** The gateway's defaults (GATEWAY_CONCURRENCY_INITIAL / MIN / MAX, buffer 50%). */
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

/**
 * `size` requests at once against an upstream that serves `parallel` at once in `serviceMs` each
 * and queues the rest; the admitted ones all finish. Returns how many were refused.
 */
function burst(limit: AdaptiveConcurrencyLimit, clock: { now: number }, { size, parallel, serviceMs }: { size: number; parallel: number; serviceMs: number }): number {
  const admitted: Release[] = [];
  for (let i = 0; i < size; i++) {
    const release = limit.tryAcquire();
    if (release) admitted.push(release);
  }
  const start = clock.now;
  admitted.forEach((release, i) => {
    clock.now = start + serviceMs * Math.ceil((i + 1) / parallel);
    release(true);
  });
  return size - admitted.length;
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
 * A shed client tries again 5 ms later. Requests still in flight at the end finish then.
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
    if (clock.now - start > durationMs) {
      for (const pending of [event, ...events]) {
        clock.now = Math.max(clock.now, pending.at);
        pending.release?.(true);
      }
      break;
    }
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

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]!;

describe("adaptive concurrency limit", () => {
  describe("no shedding without overload", () => {
    it("admits a burst of 64 right after start: no phase at the minimum, the initial limit at once", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused").to.equal(0);
      // A second one, as the first one's latencies arrive, and the initial limit still holds exactly.
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused").to.equal(0);
      const many = Array.from({ length: 100 }, () => limit.tryAcquire());
      expect(many.every(Boolean), "100 at once").to.equal(true);
      expect(limit.tryAcquire(), "the 101st is shed").to.equal(undefined);
      many[0]!(false);
      expect(limit.tryAcquire(), "a released slot is free again").to.be.a("function");
    });

    it("learns the latency without a queue from quiet live requests (at most the minimum in flight), without cutting admissions", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 10 });
      // Three at once stay quiet; a fourth would not, and nothing is refused for it.
      const held = [limit.tryAcquire(), limit.tryAcquire(), limit.tryAcquire()];
      clock.now += 5;
      held.forEach((release) => release!(true));
      serial(limit, clock, 5, 7);
      expect(limit.minRtt).to.equal(5);
      expect(limit.limit).to.equal(100);
      // It follows an upstream that got slower (or faster) for good, from quiet requests alone.
      serial(limit, clock, 8, 10);
      expect(limit.minRtt).to.equal(8);
      serial(limit, clock, 4, 10);
      expect(limit.minRtt).to.equal(4);
      expect(limit.probing).to.equal(false);
    });

    it("admits a burst of 64 after a quiet minute — also one that follows an overload", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 5, 50);
      clock.now += 60_000;
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused after a quiet minute").to.equal(0);
      // An overload drives the limit far below 64 …
      simulate(limit, clock, { clients: 50, parallel: 4, serviceMs: 5, durationMs: 10_000 });
      expect(limit.limit).to.be.below(20);
      // … and once nothing has been in flight for a while, it is forgotten.
      clock.now += 60_000;
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused after overload and a quiet minute").to.equal(0);
    });

    it("admits bursts of 64 all through what used to be the re-measurements (~5 s after start, then every minute)", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      const refusals: string[] = [];
      let lowest = Infinity;
      let probed = false;
      // Two minutes and more of light traffic (20 requests one at a time), then a burst of 64, every 1.6 s.
      while (clock.now < 130_000) {
        serial(limit, clock, 5, 20);
        const at = clock.now;
        const refused = burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 });
        if (refused > 0) refusals.push(`${refused} at ${(at / 1_000).toFixed(1)} s`);
        lowest = Math.min(lowest, limit.limit);
        probed ||= limit.probing;
        clock.now += 1_500;
      }
      expect(refusals, "bursts with refusals").to.deep.equal([]);
      expect(lowest, "the lowest limit between bursts").to.be.at.least(100);
      expect(probed, "no probe without sustained load").to.equal(false);
      expect(limit.minRtt).to.equal(5);
    });

    it("admits a burst that queues, and the next one too once light traffic shows latency back at its best", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 5, 50);
      for (let i = 0; i < 5; i++) {
        // 64 on an upstream that serves 8 at once: the last waits 8 × 5 ms. The limit learns from it …
        expect(burst(limit, clock, { size: 64, parallel: 8, serviceMs: 5 }), `burst ${i} refused`).to.equal(0);
        // … but one burst cuts it by a quarter at most per window, and light traffic within the target restores it.
        expect(limit.limit).to.be.at.least(64);
        serial(limit, clock, 5, 60);
        expect(limit.limit).to.be.at.least(100);
      }
    });

    it("does not grow while most of the limit goes unused, so a sudden burst meets a limit near the recent load", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, initialLimit: 10, maxLimit: 1_000, windowMs: 10 });
      // Two clients for a minute of windows where latency is at its best: the limit could double every window.
      simulate(limit, clock, { clients: 2, parallel: 100, serviceMs: 1, durationMs: 60_000 });
      expect(limit.limit, "held near the load, not grown to the maximum").to.be.at.most(10);
      // Then 200 clients at once: at most that many get in at the same time, the rest are shed.
      const burstRun = simulate(limit, clock, { clients: 200, parallel: 4, serviceMs: 1, durationMs: 5 });
      expect(Math.max(...burstRun.limits)).to.be.at.most(10);
      expect(burstRun.shed).to.be.at.least(190);
    });
  });

  describe("overload", () => {
    it("sustained overload: 50 clients on an upstream that serves 4 at once — the limit falls, the rest are shed, admitted latency stays within the buffer", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 10, 50);
      expect(limit.minRtt).to.equal(10);
      const run = simulate(limit, clock, { clients: 50, parallel: 4, serviceMs: 10, durationMs: 20_000 });
      expect(run.shed, "overload is shed").to.be.greaterThan(0);
      // Without the limit every request would wait behind 50: 125 ms. With it, the median within minRTT + 50%.
      expect(percentile(run.lateLatencies, 0.5), "median latency of admitted requests").to.be.at.most(10 * 1.5);
      expect(percentile(run.lateLatencies, 0.9), "p90 latency of admitted requests").to.be.at.most(10 * 1.5);
      // Throughput stays near what the upstream can do (4 per 10 ms over the second half).
      expect(run.lateLatencies.length / 10_000, "admitted per ms").to.be.above(0.35);
      const settled = run.limits.slice(-200);
      expect(Math.max(...settled)).to.be.at.most(8);
      expect(Math.min(...settled)).to.be.at.least(4);
      expect(limit.minRtt, "overload did not raise minRTT").to.equal(10);
    });

    it("overloaded from the very start (no quiet request ever): probes at half the load find the latency without a queue", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      const run = simulate(limit, clock, { clients: 50, parallel: 4, serviceMs: 10, durationMs: 20_000 });
      expect(run.shed).to.be.greaterThan(0);
      expect(limit.minRtt).to.equal(10);
      expect(percentile(run.lateLatencies, 0.5)).to.be.at.most(10 * 1.5);
      expect(run.lateLatencies.length / 10_000, "admitted per ms").to.be.above(0.35);
    });

    it("recovers when the load drops: the limit climbs back, bursts of 64 are admitted again", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 10, 50);
      simulate(limit, clock, { clients: 50, parallel: 4, serviceMs: 10, durationMs: 10_000 });
      expect(limit.limit).to.be.at.most(8);
      // Two clients now: no queue, nothing shed after the first windows, the limit back at the initial one.
      const light = simulate(limit, clock, { clients: 2, parallel: 4, serviceMs: 10, durationMs: 2_000 });
      expect(light.shed).to.equal(0);
      expect(limit.limit).to.equal(100);
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 10 })).to.equal(0);
      // And more load that the upstream can serve (40 at once of 100) grows it to the maximum.
      const limitTo40 = limiter({ clock, initialLimit: 4, maxLimit: 40 });
      serial(limitTo40, clock, 10, 25);
      expect(limitTo40.limit).to.equal(4);
      const run = simulate(limitTo40, clock, { clients: 40, parallel: 100, serviceMs: 10, durationMs: 30_000 });
      expect(run.limits.at(-1)).to.equal(40);
      expect(limitTo40.limit).to.equal(40);
    });

    it("an upstream that got slower for good under load: a probe at half the load learns its new latency, the limit never goes to the minimum", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 5 });
      serial(limit, clock, 1, 5);
      expect(limit.minRtt).to.equal(1);
      // From now on every request takes 40 ms however few are in flight (a slower database, say).
      const slow = simulate(limit, clock, { clients: 20, parallel: 1_000, serviceMs: 40, durationMs: 20_000 });
      expect(limit.minRtt, "learned").to.be.closeTo(40, 1e-9);
      expect(Math.min(...slow.limits), "the lowest limit").to.be.above(3);
      expect(Math.min(...slow.limits.slice(-100)), "the limit recovered").to.be.at.least(20);
      expect(slow.lateLatencies.length / 10_000, "admitted per ms (20 clients / 40 ms)").to.be.above(0.45);
    });

    it("does not count requests admitted before a probe began (they queued with the load) toward it", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 5, windowMs: 10 });
      // Sustained load on an upstream that serves 4 at once: probes follow. Catch one as it starts.
      const events: { at: number; release?: Release }[] = Array.from({ length: 20 }, (_, i) => ({ at: i * 0.01 }));
      let inUpstream = 0;
      const early: Release[] = [];
      while (!limit.probing && clock.now < 2_000) {
        events.sort((a, b) => a.at - b.at);
        const event = events.shift()!;
        clock.now = event.at;
        if (event.release) {
          inUpstream--;
          event.release(true);
          events.push({ at: clock.now });
          continue;
        }
        const release = limit.tryAcquire();
        if (!release) {
          events.push({ at: clock.now + 5 });
          continue;
        }
        inUpstream++;
        events.push({ at: clock.now + 10 * Math.max(1, inUpstream / 4), release });
      }
      expect(clock.now, "a probe came under sustained load").to.be.below(2_000);
      // The requests in flight when it began finish very late; the probe's own (one at a time) take 10 ms.
      for (const event of events) if (event.release) early.push(event.release);
      clock.now += 500;
      early.forEach((release) => release(true));
      expect(limit.probing).to.equal(true);
      serial(limit, clock, 10, 5);
      expect(limit.probing).to.equal(false);
      expect(limit.minRtt, "measured from requests admitted during the probe only").to.equal(10);
    });

    it("learns nothing from releases without a sample (failures, answers that never reached the upstream)", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 5 });
      for (let i = 0; i < 100; i++) {
        const release = limit.tryAcquire()!;
        clock.now += 1_000;
        release(false);
      }
      expect(limit.minRtt).to.equal(0);
      expect(limit.limit).to.equal(100);
    });
  });
});

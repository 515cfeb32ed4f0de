// The adaptive concurrency limit on its own, with a fake clock and a simulated upstream.
import { expect } from "chai";
import {
  AdaptiveConcurrencyLimit,
  type ConcurrencyLimitOptions,
  type Release,
} from "../src/runtime/concurrency-limit.js";
import { seededRandom } from "../../test/support/seeded-random.js";

/** The gateway's defaults (GATEWAY_CONCURRENCY_INITIAL / MIN / MAX, buffer 50%). */
function limiter(options: Partial<ConcurrencyLimitOptions> & { clock: { now: number } }): AdaptiveConcurrencyLimit {
  const { clock, ...rest } = options;
  return new AdaptiveConcurrencyLimit({
    initialLimit: 100,
    minLimit: 3,
    maxLimit: 1_000,
    now: () => clock.now,
    random: () => 0.5,
    ...rest,
  });
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
function burst(
  limit: AdaptiveConcurrencyLimit,
  clock: { now: number },
  { size, parallel, serviceMs }: { size: number; parallel: number; serviceMs: number },
): number {
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
 * `clients` closed-loop clients (each sends its next request when the last is answered) against an upstream that serves `parallel` requests at once in
 * `serviceMs` each and queues the rest (latency = serviceMs × max(1, in flight / parallel)).
 * A shed client tries again 5 ms later. Requests still in flight at the end finish then.
 */
function closedLoop(
  limit: AdaptiveConcurrencyLimit,
  clock: { now: number },
  {
    clients,
    parallel,
    serviceMs,
    durationMs,
  }: { clients: number; parallel: number; serviceMs: number; durationMs: number },
): SimulationResult {
  const start = clock.now;
  const events: { at: number; release?: Release }[] = Array.from({ length: clients }, (_, i) => ({
    at: start + i * 0.01,
  }));
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

/**
 * Requests arriving at `perMs` a millisecond whatever happens to earlier ones (an open loop: a shed
 * request is not sent again), against the same upstream. With `stall`, the upstream answers nothing
 * from `stall.at` for `stall.ms` (a replica killed, its calls failing over): what would have finished
 * then finishes when it ends.
 */
function openLoop(
  limit: AdaptiveConcurrencyLimit,
  clock: { now: number },
  {
    perMs,
    parallel,
    serviceMs,
    durationMs,
    stall,
  }: { perMs: number; parallel: number; serviceMs: number; durationMs: number; stall?: { at: number; ms: number } },
): SimulationResult {
  const start = clock.now;
  const result: SimulationResult = { admitted: 0, shed: 0, lateLatencies: [], limits: [] };
  const pending: { at: number; release: Release }[] = [];
  let inUpstream = 0;
  const finishUntil = (until: number) => {
    pending.sort((a, b) => a.at - b.at);
    while (pending.length > 0 && pending[0]!.at <= until) {
      const done = pending.shift()!;
      clock.now = done.at;
      inUpstream--;
      done.release(true);
    }
  };
  for (let i = 0; ; i++) {
    const at = start + i / perMs;
    if (at - start > durationMs) break;
    finishUntil(at);
    clock.now = at;
    const release = limit.tryAcquire();
    result.limits.push(limit.limit);
    if (!release) {
      result.shed++;
      continue;
    }
    result.admitted++;
    inUpstream++;
    let done = at + serviceMs * Math.max(1, inUpstream / parallel);
    if (stall && done >= start + stall.at && at < start + stall.at + stall.ms)
      done = Math.max(done, start + stall.at + stall.ms) + serviceMs;
    if (at - start > durationMs / 2) result.lateLatencies.push(done - at);
    pending.push({ at: done, release });
  }
  finishUntil(Infinity);
  return result;
}

/**
 * Independent clients (Poisson arrivals at `load` × the upstream's capacity; a shed request is not
 * sent again) against an upstream of `servers` first-come first-served servers whose service times
 * vary (exponential, mean `serviceMs`): an M/M/c queue, whose backlog bunches and drains by chance
 * even below capacity. Returns the admitted share, the admitted per ms and the admitted latencies.
 */
function randomOpenLoop(
  limit: AdaptiveConcurrencyLimit,
  clock: { now: number },
  {
    load,
    servers,
    serviceMs,
    durationMs,
    seed,
  }: { load: number; servers: number; serviceMs: number; durationMs: number; seed: number },
): { share: number; perMs: number; latencies: number[] } {
  const random = seededRandom(seed);
  const exponential = (mean: number) => -Math.log(1 - random()) * mean;
  const freeAt = Array.from({ length: servers }, () => clock.now);
  const pending: { at: number; release: Release }[] = [];
  const start = clock.now;
  const latencies: number[] = [];
  let shed = 0;
  for (
    let at = start + exponential(serviceMs / servers / load);
    at - start <= durationMs;
    at += exponential(serviceMs / servers / load)
  ) {
    pending.sort((a, b) => a.at - b.at);
    while (pending.length > 0 && pending[0]!.at <= at) {
      const done = pending.shift()!;
      clock.now = done.at;
      done.release(true);
    }
    clock.now = at;
    const release = limit.tryAcquire();
    if (!release) {
      shed++;
      continue;
    }
    const server = freeAt.indexOf(Math.min(...freeAt));
    const done = Math.max(at, freeAt[server]!) + exponential(serviceMs);
    freeAt[server] = done;
    latencies.push(done - at);
    pending.push({ at: done, release });
  }
  for (const done of pending.sort((a, b) => a.at - b.at)) {
    clock.now = done.at;
    done.release(true);
  }
  return { share: latencies.length / (latencies.length + shed), perMs: latencies.length / durationMs, latencies };
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]!;

describe("adaptive concurrency limit", () => {
  describe("no shedding without overload", () => {
    it("admits a burst of 64 right after start; past the limit and the backlog beyond it, sheds what overflows", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused").to.equal(0);
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }), "refused").to.equal(0);
      // The limit (100) and a backlog as large beyond it.
      const many = Array.from({ length: 200 }, () => limit.tryAcquire());
      expect(many.every(Boolean), "200 at once").to.equal(true);
      expect(limit.tryAcquire(), "the 201st is shed").to.equal(undefined);
      expect(limit.shedding).to.equal(true);
      // Nothing says yet that arrivals outpace completions: the backlog may drain, only its overflow is shed.
      many[0]!(false);
      expect(limit.tryAcquire(), "a place freed in the backlog is taken again").to.be.a("function");
      expect(limit.tryAcquire(), "the backlog is full again").to.equal(undefined);
    });

    for (const clients of [4, 16, 64]) {
      it(`never sheds ${clients} closed-loop clients, however long they wait behind each other (an upstream serving 4 at once)`, () => {
        const clock = { now: 0 };
        const limit = limiter({ clock });
        serial(limit, clock, 5, 50);
        const run = closedLoop(limit, clock, { clients, parallel: 4, serviceMs: 5, durationMs: 20_000 });
        expect(run.shed, "shed").to.equal(0);
        expect(limit.shedding).to.equal(false);
        expect(run.admitted / 20_000, "served per ms: the upstream's capacity").to.be.above(
          (Math.min(clients, 4) / 5) * 0.95,
        );
      });
    }

    it("never sheds a closed loop that grows from 4 to 16 to 64 clients and back, without a pause", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      let shed = 0;
      for (const clients of [4, 16, 64, 16, 64, 4])
        shed += closedLoop(limit, clock, { clients, parallel: 4, serviceMs: 5, durationMs: 5_000 }).shed;
      expect(shed).to.equal(0);
    });

    it("admits at least 90 % of an open loop at exactly the upstream's capacity", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 5, 50);
      const run = openLoop(limit, clock, { perMs: 4 / 5, parallel: 4, serviceMs: 5, durationMs: 20_000 });
      expect(run.admitted / (run.admitted + run.shed)).to.be.at.least(0.9);
    });

    for (const servers of [4, 32]) {
      it(`admits at least 90 % of independent clients at exactly the capacity of an upstream whose latency varies (M/M/${servers}), and sheds none at 80 %`, () => {
        const clock = { now: 0 };
        const limit = limiter({ clock });
        const upstream = { servers, serviceMs: 5, seed: 1 };
        randomOpenLoop(limit, clock, { ...upstream, load: 0.3, durationMs: 5_000 });
        expect(randomOpenLoop(limit, clock, { ...upstream, load: 0.8, durationMs: 30_000, seed: 2 }).share).to.equal(1);
        // A cliff down to the limit once the backlog filled shed 21–31 % here (a loss system at ρ = 1).
        expect(
          randomOpenLoop(limit, clock, { ...upstream, load: 1, durationMs: 60_000, seed: 3 }).share,
        ).to.be.at.least(0.9);
      });
    }

    it("sheds nothing when a replica dies under half the capacity: its calls stall 150 ms, then fail over", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 5, 50);
      const run = openLoop(limit, clock, {
        perMs: 0.4,
        parallel: 4,
        serviceMs: 5,
        durationMs: 10_000,
        stall: { at: 5_000, ms: 150 },
      });
      expect(run.shed).to.equal(0);
      expect(Math.max(...run.lateLatencies), "the stall was felt").to.be.at.least(150);
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
      expect(limit.sheddingLimit).to.equal(100);
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
      openLoop(limit, clock, { perMs: 2.4, parallel: 4, serviceMs: 5, durationMs: 10_000 });
      expect(limit.sheddingLimit).to.be.below(20);
      // … and once nothing has been in flight for a while, it is forgotten.
      clock.now += 60_000;
      expect(
        burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 }),
        "refused after overload and a quiet minute",
      ).to.equal(0);
    });

    it("admits bursts of 64 all through what used to be the re-measurements (~5 s after start, then every minute)", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      const refusals: string[] = [];
      let probed = false;
      // Two minutes and more of light traffic (20 requests one at a time), then a burst of 64, every 1.6 s.
      while (clock.now < 130_000) {
        serial(limit, clock, 5, 20);
        const at = clock.now;
        const refused = burst(limit, clock, { size: 64, parallel: 64, serviceMs: 5 });
        if (refused > 0) refusals.push(`${refused} at ${(at / 1_000).toFixed(1)} s`);
        probed ||= limit.probing;
        clock.now += 1_500;
      }
      expect(refusals, "bursts with refusals").to.deep.equal([]);
      expect(probed, "no probe without sustained load").to.equal(false);
      expect(limit.minRtt).to.equal(5);
    });

    it("admits bursts that queue, one after another", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 5, 50);
      for (let i = 0; i < 5; i++) {
        // 64 on an upstream that serves 8 at once: the last waits 8 × 5 ms.
        expect(burst(limit, clock, { size: 64, parallel: 8, serviceMs: 5 }), `burst ${i} refused`).to.equal(0);
        serial(limit, clock, 5, 60);
        expect(limit.sheddingLimit).to.be.at.least(100);
      }
    });

    it("does not grow while most of the limit goes unused, so a sudden burst meets a limit near the recent load", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, initialLimit: 10, maxLimit: 1_000, windowMs: 10 });
      // Two clients for a minute of windows where latency is at its best: the limit could double every window.
      closedLoop(limit, clock, { clients: 2, parallel: 100, serviceMs: 1, durationMs: 60_000 });
      expect(limit.sheddingLimit, "held near the load, not grown to the maximum").to.be.at.most(10);
      // Then 200 clients at once: past the limit and a backlog of the initial limit (10) beyond it, the rest are shed.
      const burstRun = closedLoop(limit, clock, { clients: 200, parallel: 4, serviceMs: 1, durationMs: 5 });
      expect(Math.min(...burstRun.limits), "the limit and the backlog beyond it").to.be.at.most(10 + 10);
      expect(burstRun.shed).to.be.at.least(180);
    });
  });

  describe("overload: requests arriving faster than they are served", () => {
    it("three times the capacity, open loop: the backlog is cut at once, the rest shed, admitted latency stays within the buffer", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 10, 50);
      expect(limit.minRtt).to.equal(10);
      const run = openLoop(limit, clock, { perMs: 1.2, parallel: 4, serviceMs: 10, durationMs: 20_000 });
      expect(run.shed, "overload is shed").to.be.greaterThan(0);
      expect(limit.shedding).to.equal(true);
      // Without the limit every request would wait behind an ever longer backlog. With it, within minRTT + 50% …
      expect(percentile(run.lateLatencies, 0.5), "median latency of admitted requests").to.be.at.most(10 * 1.5);
      expect(percentile(run.lateLatencies, 0.99), "p99 latency of admitted requests").to.be.at.most(10 * 2);
      // … and throughput stays near what the upstream can do (4 per 10 ms over the second half).
      expect(run.lateLatencies.length / 10_000, "admitted per ms").to.be.above(0.3);
      const settled = run.limits.slice(-2_000);
      expect(Math.max(...settled)).to.be.at.most(8);
      expect(Math.min(...settled)).to.be.at.least(4);
      expect(limit.minRtt, "overload did not raise minRTT").to.equal(10);
    });

    for (const servers of [4, 32]) {
      it(`three times the capacity of an upstream whose latency varies (M/M/${servers}): goodput ≥ 0.75, admitted p99 within 2× the unloaded p99`, () => {
        const clock = { now: 0 };
        const limit = limiter({ clock });
        const upstream = { servers, serviceMs: 5, seed: 4 };
        const unloaded = randomOpenLoop(limit, clock, { ...upstream, load: 0.1, durationMs: 30_000 });
        const overload = randomOpenLoop(limit, clock, { ...upstream, load: 3, durationMs: 30_000, seed: 5 });
        expect(limit.shedding).to.equal(true);
        expect(overload.perMs / (servers / 5), "goodput ÷ capacity").to.be.at.least(0.75);
        const late = overload.latencies.slice(overload.latencies.length / 2);
        expect(percentile(late, 0.99), "admitted p99").to.be.at.most(2 * percentile(unloaded.latencies, 0.99));
      });
    }

    it("overloaded from the very start (no quiet request ever): probes at half the load find the latency without a queue", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      const run = openLoop(limit, clock, { perMs: 1.2, parallel: 4, serviceMs: 10, durationMs: 20_000 });
      expect(run.shed).to.be.greaterThan(0);
      expect(limit.minRtt).to.be.closeTo(10, 1);
      // Within minRTT + 50 %, and the 5 ms a request beyond the limit may wait while arrivals outpace completions.
      expect(percentile(run.lateLatencies, 0.5)).to.be.at.most(10 * 1.5 + 5);
      expect(run.lateLatencies.length / 10_000, "admitted per ms").to.be.above(0.3);
    });

    it("stops shedding when the load drops: a second later nothing is shed, bursts of 64 are admitted again", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock });
      serial(limit, clock, 10, 50);
      openLoop(limit, clock, { perMs: 1.2, parallel: 4, serviceMs: 10, durationMs: 10_000 });
      expect(limit.shedding).to.equal(true);
      // Half the capacity now: shedding ends within a second, and the limit climbs back.
      const light = openLoop(limit, clock, { perMs: 0.2, parallel: 4, serviceMs: 10, durationMs: 3_000 });
      expect(light.shed, "shed after the drop").to.be.below(0.2 * 1_000);
      expect(limit.shedding).to.equal(false);
      expect(burst(limit, clock, { size: 64, parallel: 64, serviceMs: 10 })).to.equal(0);
    });

    it("an upstream that got slower for good under overload: a probe at half the load learns its new latency, the limit recovers from the stale target", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 5 });
      serial(limit, clock, 1, 5);
      expect(limit.minRtt).to.equal(1);
      // From now on every request takes 40 ms however few are in flight (a slower database, say), and
      // requests arrive faster than 20 at once can serve them.
      const slow = openLoop(limit, clock, { perMs: 1, parallel: 20, serviceMs: 40, durationMs: 20_000 });
      expect(limit.minRtt, "learned").to.be.closeTo(40, 1);
      expect(Math.min(...slow.limits.slice(-2_000)), "the limit recovered from the stale target").to.be.at.least(15);
      expect(slow.lateLatencies.length / 10_000, "admitted per ms (20 at once / 40 ms)").to.be.above(0.4);
    });

    it("does not count requests admitted before a probe began (they queued with the load) toward it", () => {
      const clock = { now: 0 };
      const limit = limiter({ clock, minRttSamples: 5, windowMs: 10, minRttIntervalMs: 200 });
      // Open-loop overload on an upstream that serves 4 at once: probes follow. Catch one as it starts.
      const pending: { at: number; release: Release }[] = [];
      let inUpstream = 0;
      for (let at = 0; !limit.probing && at < 5_000; at += 1) {
        pending.sort((a, b) => a.at - b.at);
        while (pending.length > 0 && pending[0]!.at <= at) {
          const done = pending.shift()!;
          clock.now = done.at;
          inUpstream--;
          done.release(true);
        }
        clock.now = at;
        const release = limit.tryAcquire();
        if (!release) continue;
        inUpstream++;
        pending.push({ at: at + 10 * Math.max(1, inUpstream / 4), release });
      }
      expect(limit.probing, "a probe came under sustained overload").to.equal(true);
      // The requests in flight when it began finish very late; the probe's own (one at a time) take 10 ms.
      clock.now += 500;
      pending.forEach((p) => p.release(true));
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
      expect(limit.sheddingLimit).to.equal(100);
    });
  });
});

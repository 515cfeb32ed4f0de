// Adaptive concurrency limit, after Envoy's adaptive concurrency filter (its gradient controller)
// and Netflix's Gradient2 — applied only to overload. Each window compares its latency with the
// latency without a queue (minRTT) plus a buffer and scales a limit by that gradient, plus a
// square-root headroom that keeps probing upward while no queue forms; a queue shows up as latency
// above the target, so the limit settles where requests stop queueing.
//
// Latency alone cannot tell overload from a busy, healthy load: 64 clients that each send their next
// request when the last is answered (a closed loop) wait behind one another as long as requests
// arriving three times faster than they are served would — but their backlog never grows, and
// shedding them only makes them ask again at once. So beyond the gradient's limit the gateway keeps
// a backlog of up to `growthToShed` more requests (the initial limit, 100: a closed loop of that many
// clients, a burst, the calls piled up while a replica fails over) and sheds only when that fills —
// arrivals have outpaced completions that far, which a closed loop never does.
//
// What it sheds then is judged by how long a request would wait, as CoDel judges a queue (over
// the 100 ms window here), not by a cliff down to the limit: a cliff makes an open loop at exactly
// the capacity a loss system — arrivals that happen to bunch find the limit full and are shed,
// 20–30 % of them (a simulated M/M/c upstream at ρ = 1), while the backlog would have drained on its
// own. Each window compares arrivals with the completions the upstream managed at its best lately:
// - arrivals within a quarter of that: the backlog beyond the limit can drain, it stays at
//   `growthToShed` and only what overflows it is shed (a queue at the rate of completions is a
//   busy load, not overload — and on a core the mesh shares, a deep backlog's batching is part of
//   its capacity);
// - arrivals beyond that: the backlog grows. It is held to what the upstream completes within the
//   buffer over minRTT (a request beyond the limit waits about as long as the buffer allows
//   latency to grow), so admitted requests keep their latency and the rest are answered at once.
// Shedding ends once a second passes without a shed (the load fits again).
//
// minRTT is learned from live traffic only, never by cutting admissions to the minimum:
// - quiet requests — ones that had at most `minLimit` requests in flight all their life — cannot
//   have queued behind our own load: a batch of them (`minRttSamples`) sets minRTT (while the limit
//   sheds, only lower: the load must not raise its own target);
// - until such a batch (or a probe) has confirmed it, the fastest window so far stands in for it;
// - a probe admits half of the requests in flight until it has `minRttSamples` latencies: under
//   sustained load (never quiet for a few windows running) while minRTT is unconfirmed (a start
//   into load) or while the limit sheds anyway (at most every `minRttIntervalMs`), and when it
//   sheds after a few windows in a row above the target (minRTT may be stale). The same throughput with half as many
//   in flight (Little's law): saturated even there, minRTT is at most what the probe saw; less
//   throughput and as slow: the latency does not depend on our load, minRTT is the probe's (an
//   upstream that got slower for good). An idle or lightly loaded gateway, and a burst on one,
//   never meets a probe.
// The limit only falls on a window with more than `minLimit` in flight and latency above the
// target: by at most a quarter on the first such window (one slow burst does not halve it), by the
// whole gradient (at most half) on the next ones. It grows back to the initial limit as soon as a
// window is within the target, and is forgotten (back to at least the initial limit) once nothing
// has been in flight for `idleResetMs`.
//
// Priority (issue 46): the limit is the lowest priority's — the lowest that arrived lately — and only
// its requests teach it. While it sheds, each priority above it is cut off a quarter of the limit
// higher (of the initial limit, while the limit is lower): a flood of what can wait is shed first,
// and default and critical requests still find places beside it. A load of one priority alone is limited exactly as without
// priorities. Teaching the limit with the lowest priority alone keeps a mix of kinds from moving it:
// a few heavy critical writes would otherwise raise the median latency above the target and cut
// the limit — and the mesh's goodput with it — to the minimum.
import type { Priority } from "@switchyard/platform/priority.js";

export interface ConcurrencyLimitOptions {
  /** The limit at start, after an idle period, and the level it grows back to whenever latency is within the target. */
  initialLimit: number;
  /** The lowest limit; also the most requests in flight at which a request's latency counts as unqueued. */
  minLimit: number;
  maxLimit: number;
  /** How far above minRTT a window's latency may be before the limit shrinks (0.5 = 50%). */
  buffer?: number;
  /** The percentile of a window's latencies (and of a minRTT batch) that is compared (0.5, as Envoy: a few slow kinds of request in the mix do not move it). */
  percentile?: number;
  /** Length of a sample window. */
  windowMs?: number;
  /** Latencies that make one minRTT estimate (a batch of quiet requests, or one probe). */
  minRttSamples?: number;
  /** Least time between probes while the limit sheds under sustained load, once minRTT is confirmed (±15% jitter, so replicas do not probe in step). */
  minRttIntervalMs?: number;
  /** Nothing in flight for this long: the limit returns to at least the initial limit. */
  idleResetMs?: number;
  /** The backlog admitted beyond the limit before shedding begins; default: the initial limit. */
  growthToShed?: number;
  now?: () => number;
  random?: () => number;
}

/** Ends an admitted request; `sample`: it reached the upstream and succeeded, so its latency counts. */
export type Release = (sample: boolean) => void;

const JITTER = 0.15;
/** Windows in a row with requests in flight throughout (never down to `minLimit`) before a probe may run. */
const SUSTAINED_WINDOWS_BEFORE_PROBE = 5;
/** Windows in a row above the target (the limit falling each time) after which a probe runs without waiting for the interval … */
const WINDOWS_ABOVE_TARGET_BEFORE_PROBE = 3;
/** … if the last probe is at least this many windows ago. */
const STALE_PROBE_SPACING_WINDOWS = 20;
/** A probe admits this share of the requests in flight. */
const PROBE_FRACTION = 0.5;
/** A probe lasts at most this many windows (or 4 latencies, if longer); with too few samples by then it teaches nothing. */
const PROBE_MAX_WINDOWS = 10;
/** Latency differences within this share count as the same (noise). */
const TOLERANCE = 0.1;
/** A probe with half as many in flight that keeps this share of the throughput before it finds the upstream saturated still (1: fully; ½: not at all). */
const SATURATED_THROUGHPUT = 0.8;
/** Windows after the last shed request during which quiet requests may lower minRTT but not raise it … */
const SHEDDING_MEMORY_WINDOWS = 10;
/** … unless the limit has been at the minimum for this many windows in a row. */
const WINDOWS_AT_MINIMUM_BEFORE_RAISE = 5;
/** The first window above the target moves the limit this share of the way to its gradient (Gradient2's smoothing): at most -25%. */
const SHRINK_SMOOTHING = 0.5;
/** Shedding stops after this many windows in a row without a shed request: the load fits under the limit again. */
const WINDOWS_WITHOUT_SHED_TO_STOP = 10;
/** Arrivals more than this share above the best recent completion rate: the backlog grows (rates of one window are noisy). */
const GROWTH_MARGIN = 0.25;
/** The best completion rate fades by this factor a window (half-life ~14 s), so it follows an upstream that got slower. */
const PEAK_COMPLETIONS_FADE = 0.995;
/** While shedding, each priority above the lowest is cut off this share of the limit (of the initial limit while lower) higher. */
const PRIORITY_SHARE = 0.25;
const PRIORITY_RANK: Record<Priority, number> = { sheddable: 0, default: 1, critical: 2 };
/** Each priority and those above it: whose counts an admission of it raises. */
const PRIORITIES_UP_FROM: Record<Priority, readonly Priority[]> = {
  sheddable: ["sheddable", "default", "critical"],
  default: ["default", "critical"],
  critical: ["critical"],
};
/** A priority counts as arriving for this many windows after its last request. */
const PRIORITY_MEMORY_WINDOWS = 10;

function percentileOf(values: number[], p: number): number {
  // A typed array sorts numerically without a comparator call per comparison (once per window, on the hot path).
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

interface Probe {
  id: number;
  limit: number;
  /** The window before: its latency, and the requests in flight its samples were admitted with. */
  rttBefore: number;
  admittedWithBefore: number;
  endsBy: number;
  samples: number[];
  admittedWith: number[];
}

export class AdaptiveConcurrencyLimit {
  private limitValue: number;
  private inflightCount = 0;
  private minRttMs = 0;
  /** minRTT came from quiet requests or a probe (not only from the fastest window). */
  private confirmed = false;
  private lastShedAt = -Infinity;
  private nextProbeAt = 0;
  private probe: Probe | undefined;
  private probes = 0;
  /** Counts admissions that took the in-flight count above `minLimit`: a request during which it did not change stayed quiet. */
  private readonly crowded: Record<Priority, number> = { sheddable: 0, default: 0, critical: 0 };
  private quietSamples: number[] = [];
  private idleSince: number | undefined;
  private windowStartedAt: number | undefined;
  private samples: number[] = [];
  /** For each sample of the window, the requests in flight when it was admitted (itself included). */
  private admittedWith: number[] = [];
  /** The most and the fewest requests in flight at once during the current window. */
  private windowPeakInflight = 0;
  private windowLowInflight = 0;
  /** The backlog grew beyond the limit: requests beyond it are shed (see the top of the file). */
  private overloaded = false;
  private windowsWithoutShed = 0;
  /** A request was shed during the current window. */
  private windowShed = false;
  /** Requests that asked for a place (admitted or shed) and places given back, during the current window. */
  private windowArrivals = 0;
  private windowCompletions = 0;
  private countedSince: number;
  /** The best completions per ms of a window lately (fading). */
  private peakCompletionsPerMs = 0;
  /** The last window's arrivals outpaced the best completion rate: the backlog grows. */
  private growing = false;
  private sustainedWindows = 0;
  private windowsAboveTarget = 0;
  private windowsAtMinimum = 0;
  private lastProbeAt = -Infinity;
  /** Requests in flight, by priority. */
  private readonly inflightBy: Record<Priority, number> = { sheddable: 0, default: 0, critical: 0 };
  /** When a request of each priority last asked for a place. */
  private readonly lastArrival: Record<Priority, number> = {
    sheddable: -Infinity,
    default: -Infinity,
    critical: -Infinity,
  };
  private readonly buffer: number;
  private readonly percentile: number;
  private readonly windowMs: number;
  private readonly minRttSamples: number;
  private readonly minRttIntervalMs: number;
  private readonly idleResetMs: number;
  private readonly growthToShed: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly options: ConcurrencyLimitOptions) {
    this.buffer = options.buffer ?? 0.5;
    this.percentile = options.percentile ?? 0.5;
    this.windowMs = options.windowMs ?? 100;
    this.minRttSamples = options.minRttSamples ?? 25;
    this.minRttIntervalMs = options.minRttIntervalMs ?? 60_000;
    this.idleResetMs = options.idleResetMs ?? 5_000;
    this.growthToShed = Math.max(1, options.growthToShed ?? options.initialLimit);
    this.now = options.now ?? (() => performance.now());
    this.random = options.random ?? Math.random;
    this.limitValue = this.clamp(options.initialLimit);
    this.idleSince = this.now();
    this.countedSince = this.idleSince;
  }

  /** The requests admitted at once now: while shedding the gradient's limit and the backlog allowed beyond it, else the maximum. */
  get limit(): number {
    return this.overloaded ? this.sheddingLimit + this.backlogAllowance : this.options.maxLimit;
  }

  /** The requests in flight beyond which one of this priority is shed: the limit for the lowest priority arriving, a share more for each above it. */
  limitFor(priority: Priority, now = this.now()): number {
    return this.limitAbove(priority, this.lowestArriving(now));
  }

  /** limitFor, with the lowest priority arriving already read (once per request). */
  private limitAbove(priority: Priority, lowest: Priority): number {
    if (!this.overloaded) return this.limit;
    const steps = PRIORITY_RANK[priority] - PRIORITY_RANK[lowest];
    if (steps <= 0) return this.limit;
    const reserve = Math.max(this.options.initialLimit, this.sheddingLimit) * PRIORITY_SHARE;
    return this.limit + steps * Math.max(this.options.minLimit, Math.floor(reserve));
  }

  /** Requests in flight of this priority and those below it. */
  private countOf(priority: Priority): number {
    const { sheddable, default: normal } = this.inflightBy;
    if (priority === "sheddable") return sheddable;
    return priority === "default" ? normal + sheddable : this.inflightCount;
  }

  /** Requests in flight of the lowest priority arriving and those below it: what the limit limits. */
  private lowestCount(now: number): number {
    return this.countOf(this.lowestArriving(now));
  }

  /**
   * What a request of this priority is counted against its limit: the requests in flight of its own
   * priority and of those below it — those above it are beyond its limit —, each lower one only up to
   * its own limit (the many admitted before shedding began take no place from a higher priority).
   */
  private inflightAtOrBelow(priority: Priority, lowest: Priority): number {
    const { sheddable, default: normal, critical } = this.inflightBy;
    if (priority === "sheddable") return sheddable;
    const below = Math.min(sheddable, this.limitAbove("sheddable", lowest));
    if (priority === "default") return normal + below;
    return critical + Math.min(normal + below, this.limitAbove("default", lowest));
  }

  /** The lowest priority that arrived within the last PRIORITY_MEMORY_WINDOWS windows (default before any). */
  private lowestArriving(now: number): Priority {
    const since = now - PRIORITY_MEMORY_WINDOWS * this.windowMs;
    if (this.lastArrival.sheddable >= since) return "sheddable";
    if (this.lastArrival.default >= since || this.lastArrival.critical < since) return "default";
    return "critical";
  }

  /**
   * While shedding, the requests admitted beyond the gradient's limit: the whole backlog while it can
   * drain; while arrivals outpace completions, what the upstream completes within the buffer over
   * minRTT (the wait that keeps an admitted request's latency within the same buffer again); none
   * while a probe holds the requests in flight to its own limit.
   */
  get backlogAllowance(): number {
    if (this.probe) return 0;
    return this.growing ? Math.floor(this.peakCompletionsPerMs * this.minRttMs * this.buffer) : this.growthToShed;
  }

  /** The limit the gradient has found (a probe's, while one runs): shedding admits `backlogAllowance` beyond it. */
  get sheddingLimit(): number {
    return Math.floor(this.probe?.limit ?? this.limitValue);
  }

  /** Requests beyond the limit are being shed: the backlog grew (see the top of the file). */
  get shedding(): boolean {
    return this.overloaded;
  }

  get inflight(): number {
    return this.inflightCount;
  }

  /** The latency without a queue as learned so far (0 before the first sample). */
  get minRtt(): number {
    return this.minRttMs;
  }

  /** A probe at part of the load is running (only ever under sustained load). */
  get probing(): boolean {
    return this.probe !== undefined;
  }

  /** A release function to call when the request ends, or undefined when it must be shed. */
  tryAcquire(priority: Priority = "default"): Release | undefined {
    const now = this.now();
    this.windowArrivals++;
    this.lastArrival[priority] = now;
    if (this.inflightCount === 0 && this.idleSince !== undefined && now - this.idleSince >= this.idleResetMs)
      this.forget();
    if (this.probe && now >= this.probe.endsBy) this.endProbe(now);
    if (!this.overloaded && this.inflightCount >= this.sheddingLimit + this.growthToShed) {
      // The backlog beyond the limit filled: arrivals outpace completions — overload.
      this.overloaded = true;
      this.windowsWithoutShed = 0;
    }
    const lowestArriving = this.lowestArriving(now);
    // Until it sheds, the limit is a cap on every request in flight (a fixed limit is always one).
    const counted = this.overloaded ? this.inflightAtOrBelow(priority, lowestArriving) : this.inflightCount;
    if (counted >= this.limitAbove(priority, lowestArriving)) {
      this.windowShed = true;
      this.lastShedAt = now;
      return undefined;
    }
    this.inflightCount++;
    this.inflightBy[priority]++;
    this.idleSince = undefined;
    // The peak and the low count the requests the limit limits: the lowest priority arriving and below.
    const limited = this.countOf(lowestArriving);
    if (limited > this.windowPeakInflight) this.windowPeakInflight = limited;
    // What the limit learns is about the requests it limits: those of this priority and below (the
    // priorities above are beyond it). Alone, that is every request.
    const admittedWith = this.countOf(priority);
    const quietAtStart = admittedWith <= this.options.minLimit;
    for (const p of PRIORITIES_UP_FROM[priority]) if (this.countOf(p) > this.options.minLimit) this.crowded[p]++;
    const crowded = this.crowded[priority];
    const probe = this.probe?.id;
    const started = now;
    let released = false;
    return (sample) => {
      if (released) return;
      released = true;
      const quiet = quietAtStart && crowded === this.crowded[priority];
      this.inflightCount--;
      this.inflightBy[priority]--;
      this.windowCompletions++;
      const end = this.now();
      const lowestNow = this.lowestArriving(end);
      const limitedNow = this.countOf(lowestNow);
      if (limitedNow < this.windowLowInflight) this.windowLowInflight = limitedNow;
      if (this.inflightCount === 0) this.idleSince = end;
      // Only the lowest priority arriving teaches the limit (see the top of the file).
      if (!sample || priority !== lowestNow) return;
      const rtt = end - started;
      if (quiet) this.recordQuiet(rtt, end);
      if (this.probe) {
        // Only requests admitted by the probe ran at its concurrency; the others queued with the load before it.
        if (probe === this.probe.id) this.recordProbe(rtt, admittedWith, end);
      } else {
        this.record(rtt, admittedWith, end);
      }
    };
  }

  private clamp(limit: number): number {
    return Math.max(this.options.minLimit, Math.min(this.options.maxLimit, limit));
  }

  private jittered(interval: number): number {
    return interval * (1 - JITTER + 2 * JITTER * this.random());
  }

  private resetWindow(): void {
    this.samples = [];
    this.admittedWith = [];
    this.windowStartedAt = undefined;
    this.windowPeakInflight = this.lowestCount(this.now());
    this.windowLowInflight = this.windowPeakInflight;
    this.windowShed = false;
    this.windowArrivals = 0;
    this.windowCompletions = 0;
    this.countedSince = this.now();
  }

  /** Nothing in flight for a while: what the limit learned about load is stale; minRTT is kept. */
  private forget(): void {
    this.limitValue = Math.max(this.limitValue, this.clamp(this.options.initialLimit));
    this.overloaded = false;
    this.probe = undefined;
    this.sustainedWindows = 0;
    this.windowsAboveTarget = 0;
    this.growing = false;
    this.resetWindow();
  }

  private recordQuiet(rttMs: number, now: number): void {
    this.quietSamples.push(rttMs);
    if (this.quietSamples.length < this.minRttSamples) return;
    const batch = percentileOf(this.quietSamples, this.percentile);
    // While the limit sheds, the machine is busy with more than the requests in flight (the shedding
    // itself, other processes): a quiet request is slower for reasons the limit does not control,
    // and must not raise minRTT — that would let the load raise its own target.
    // (Unless the limit has been at the minimum for a while: nothing lower is left to try, so the
    // latency there is the best this upstream gives, as an upstream that got slower for good.)
    const shedding = now - this.lastShedAt < SHEDDING_MEMORY_WINDOWS * this.windowMs;
    const stuckAtMinimum = this.windowsAtMinimum >= WINDOWS_AT_MINIMUM_BEFORE_RAISE;
    this.minRttMs = this.minRttMs > 0 && shedding && !stuckAtMinimum ? Math.min(this.minRttMs, batch) : batch;
    this.quietSamples = [];
    this.confirm(now);
  }

  private confirm(now: number): void {
    this.confirmed = true;
    this.nextProbeAt = now + this.jittered(this.minRttIntervalMs);
  }

  private record(rttMs: number, admittedWith: number, now: number): void {
    this.windowStartedAt ??= now;
    this.samples.push(rttMs);
    this.admittedWith.push(admittedWith);
    if (now - this.windowStartedAt < this.windowMs) return;
    const windowRtt = percentileOf(this.samples, this.percentile);
    const windowAdmittedWith = percentileOf(this.admittedWith, 0.5);
    const busy = this.windowPeakInflight > this.options.minLimit;
    const sustained = this.windowLowInflight > this.options.minLimit;
    const peak = this.windowPeakInflight;
    const shed = this.windowShed;
    this.measureRates(now - this.countedSince);
    this.windowsWithoutShed = shed ? 0 : this.windowsWithoutShed + 1;
    if (this.overloaded && this.windowsWithoutShed >= WINDOWS_WITHOUT_SHED_TO_STOP) this.overloaded = false;
    this.resetWindow();
    this.windowStartedAt = now;
    // Until quiet requests or a probe confirmed minRTT, the fastest window so far stands in for it.
    if (this.minRttMs === 0 || (!this.confirmed && windowRtt < this.minRttMs)) this.minRttMs = windowRtt;
    if (this.minRttMs <= 0) return;
    const target = this.minRttMs * (1 + this.buffer);
    const gradient = Math.max(0.5, Math.min(2, target / Math.max(windowRtt, Number.EPSILON)));
    if (gradient < 1) {
      // Above the target. With no more than minLimit in flight our load cannot be the cause. The
      // first window of a run goes half of the way (a single slow burst costs at most a quarter),
      // the next ones all of it (a queue that persists halves the limit each window at most).
      const smoothing = this.windowsAboveTarget === 0 ? SHRINK_SMOOTHING : 1;
      if (busy) this.limitValue = this.clamp(this.limitValue * (1 - smoothing * (1 - gradient)));
    } else {
      // Within the target the gradient alone moves the limit onto it; the square-root headroom,
      // which probes for more, only while latency is in the lower half of the buffer.
      const scaled = this.limitValue * gradient;
      const next = this.clamp(windowRtt <= this.minRttMs * (1 + this.buffer / 2) ? scaled + Math.sqrt(scaled) : scaled);
      // Beyond the initial limit, grow only when the limit is what holds requests back: while fewer
      // than half of it were in use, a fast window says nothing about more load (and a sudden burst
      // must not find it huge). Up to the initial limit, a window within the target is enough.
      if (peak >= this.limitValue / 2) this.limitValue = next;
      else if (this.limitValue < this.options.initialLimit)
        this.limitValue = Math.min(next, this.clamp(this.options.initialLimit));
    }
    // A run of windows above the target: the limit falls each time. If minRTT is stale (the upstream
    // got slower for good) it will fall to the minimum and latency with it will not: once it sheds,
    // a probe need not wait for the interval (but comes at most once every STALE_PROBE_SPACING_WINDOWS;
    // and not while a burst drains: nothing new arrives to probe with, nothing is shed).
    this.windowsAboveTarget = gradient < 1 && busy ? this.windowsAboveTarget + 1 : 0;
    const stale =
      this.windowsAboveTarget >= WINDOWS_ABOVE_TARGET_BEFORE_PROBE &&
      shed &&
      now - this.lastProbeAt >= STALE_PROBE_SPACING_WINDOWS * this.windowMs;
    this.windowsAtMinimum = Math.floor(this.limitValue) <= this.options.minLimit ? this.windowsAtMinimum + 1 : 0;
    this.sustainedWindows = sustained ? this.sustainedWindows + 1 : 0;
    // A probe sheds: only while minRTT looks stale, or under sustained load while minRTT is
    // unconfirmed (a start into load) or the limit sheds anyway (now and then) — and only in
    // overload: a backlog that does not grow is never shed, so a probe could not hold it at half.
    const due =
      this.sustainedWindows >= SUSTAINED_WINDOWS_BEFORE_PROBE && now >= this.nextProbeAt && (!this.confirmed || shed);
    if (this.overloaded && (stale || due)) this.startProbe(windowRtt, windowAdmittedWith, now);
  }

  /** The window's arrival and completion rates: does the backlog grow? */
  private measureRates(elapsedMs: number): void {
    if (elapsedMs <= 0) return;
    const completionsPerMs = this.windowCompletions / elapsedMs;
    this.peakCompletionsPerMs = Math.max(completionsPerMs, this.peakCompletionsPerMs * PEAK_COMPLETIONS_FADE);
    this.growing = this.windowArrivals / elapsedMs > this.peakCompletionsPerMs * (1 + GROWTH_MARGIN);
  }

  private startProbe(rttBefore: number, admittedWithBefore: number, now: number): void {
    this.lastProbeAt = now;
    const limit = Math.max(
      this.options.minLimit,
      Math.floor(Math.min(this.limitValue, this.lowestCount(now)) * PROBE_FRACTION),
    );
    const endsBy = now + Math.max(PROBE_MAX_WINDOWS * this.windowMs, 4 * rttBefore);
    this.probe = { id: ++this.probes, limit, rttBefore, admittedWithBefore, endsBy, samples: [], admittedWith: [] };
  }

  private recordProbe(rttMs: number, admittedWith: number, now: number): void {
    this.probe!.samples.push(rttMs);
    this.probe!.admittedWith.push(admittedWith);
    if (this.probe!.samples.length >= this.minRttSamples) this.endProbe(now);
  }

  private endProbe(now: number): void {
    const { samples, admittedWith, rttBefore, admittedWithBefore } = this.probe!;
    this.probe = undefined;
    this.sustainedWindows = 0;
    this.windowsAboveTarget = 0;
    this.resetWindow();
    // Too few latencies to say anything (the load went away, or requests are very slow): try again later.
    if (samples.length < Math.min(3, this.minRttSamples)) return;
    const probeRtt = percentileOf(samples, this.percentile);
    // Little's law: throughput = in flight / latency. The same throughput with about half as many in
    // flight means the upstream is saturated even there: it queues them, and the latency without a
    // queue is lower still: if lower than minRTT, minRTT comes down to it, unconfirmed, and another
    // probe follows after a few sustained windows (the limit will have moved toward the new target).
    const throughputRatio = percentileOf(admittedWith, 0.5) / probeRtt / (admittedWithBefore / rttBefore);
    if (throughputRatio >= SATURATED_THROUGHPUT) {
      if (probeRtt < this.minRttMs * (1 - TOLERANCE)) {
        this.minRttMs = probeRtt;
        this.confirmed = false;
      }
      if (this.confirmed) this.confirm(now);
      else this.nextProbeAt = now;
    } else {
      // Below saturation. As slow as before with half as many in flight: the latency does not depend
      // on our load at all — the upstream got slower for good, and minRTT follows it, up too.
      // Otherwise minRTT only comes down to it: latency that half the load still costs may be
      // the machine's contention with the shedding, which a higher target would only feed.
      this.minRttMs = probeRtt >= rttBefore * (1 - TOLERANCE) ? probeRtt : Math.min(this.minRttMs, probeRtt);
      this.confirm(now);
    }
  }
}

// Adaptive concurrency limit, after Envoy's adaptive concurrency filter (its gradient controller):
// the gateway admits at most `limit` requests at once and sheds the rest at once with 503 instead
// of queueing them. Now and then — first of all at start — it measures the latency without a
// queue (minRTT) by admitting only `minLimit` requests for a few dozen samples. Between those
// measurements it compares each window's latency with minRTT plus a buffer and scales the limit
// by that gradient, plus a square-root headroom that keeps probing upward while no queue forms.
// A queue shows up as latency above the target, so the limit settles where requests stop queueing.

export interface ConcurrencyLimitOptions {
  /** The limit after the first minRTT measurement. */
  initialLimit: number;
  /** The lowest limit, and the concurrency minRTT is measured at. */
  minLimit: number;
  maxLimit: number;
  /** How far above minRTT a window's latency may be before the limit shrinks (0.5 = 50%). */
  buffer?: number;
  /** The percentile of a window's latencies (and of the minRTT samples) that is compared (0.5, as Envoy: a few slow kinds of request in the mix do not move it). */
  percentile?: number;
  /** Length of a sample window. */
  windowMs?: number;
  /** Samples that make one minRTT measurement. */
  minRttSamples?: number;
  /** Time between minRTT measurements (±15% jitter, so replicas do not measure in step). */
  minRttIntervalMs?: number;
  now?: () => number;
  random?: () => number;
}

/** Ends an admitted request; `sample`: it reached the upstream and succeeded, so its latency counts. */
export type Release = (sample: boolean) => void;

// Windows in a row at the minimum limit after which minRTT is measured again (it may be stale).
const WINDOWS_AT_MIN_BEFORE_REMEASURE = 5;
const JITTER = 0.15;
const FIRST_REMEASURE_MS = 5_000;

function percentileOf(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

export class AdaptiveConcurrencyLimit {
  private limitValue: number;
  private inflightCount = 0;
  private minRttMs = 0;
  /** While measuring minRTT: the limit to return to afterwards. */
  private measuringResumeLimit: number | undefined;
  /** Counts minRTT measurements, so that a sample knows which one it belongs to. */
  private measurement = 0;
  private nextMeasurementAt = 0;
  private windowStartedAt: number | undefined;
  private samples: number[] = [];
  private windowsAtMin = 0;
  /** The most requests in flight at once during the current window. */
  private windowPeakInflight = 0;
  private readonly buffer: number;
  private readonly percentile: number;
  private readonly windowMs: number;
  private readonly minRttSamples: number;
  private readonly minRttIntervalMs: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly options: ConcurrencyLimitOptions) {
    this.buffer = options.buffer ?? 0.5;
    this.percentile = options.percentile ?? 0.5;
    this.windowMs = options.windowMs ?? 100;
    this.minRttSamples = options.minRttSamples ?? 25;
    this.minRttIntervalMs = options.minRttIntervalMs ?? 60_000;
    this.now = options.now ?? (() => performance.now());
    this.random = options.random ?? Math.random;
    this.limitValue = this.clamp(options.initialLimit);
    this.startMeasuring();
  }

  get limit(): number {
    return Math.floor(this.measuringResumeLimit === undefined ? this.limitValue : this.options.minLimit);
  }

  get inflight(): number {
    return this.inflightCount;
  }

  /** The latency without a queue, as last measured (0 until the first measurement ends). */
  get minRtt(): number {
    return this.minRttMs;
  }

  get measuringMinRtt(): boolean {
    return this.measuringResumeLimit !== undefined;
  }

  /** A release function to call when the request ends, or undefined when it must be shed. */
  tryAcquire(): Release | undefined {
    if (this.inflightCount >= this.limit) return undefined;
    this.inflightCount++;
    if (this.inflightCount > this.windowPeakInflight) this.windowPeakInflight = this.inflightCount;
    const started = this.now();
    const measurement = this.measurement;
    let released = false;
    return (sample) => {
      if (released) return;
      released = true;
      this.inflightCount--;
      // A request admitted before a minRTT measurement began queued with the others: not a sample of it.
      if (sample && (!this.measuringMinRtt || measurement === this.measurement)) this.record(this.now() - started);
    };
  }

  private clamp(limit: number): number {
    return Math.max(this.options.minLimit, Math.min(this.options.maxLimit, limit));
  }

  private startMeasuring(): void {
    this.measurement++;
    this.measuringResumeLimit = this.limitValue;
    this.samples = [];
    this.windowStartedAt = undefined;
  }

  private record(rttMs: number): void {
    const now = this.now();
    this.samples.push(rttMs);
    if (this.measuringResumeLimit !== undefined) {
      if (this.samples.length < this.minRttSamples) return;
      this.minRttMs = percentileOf(this.samples.sort((a, b) => a - b), this.percentile);
      this.limitValue = this.measuringResumeLimit;
      this.measuringResumeLimit = undefined;
      this.samples = [];
      this.windowsAtMin = 0;
      // The first measurement sees a cold process (code not yet optimised, first connections): the second comes soon.
      const interval = this.measurement === 1 ? Math.min(this.minRttIntervalMs, FIRST_REMEASURE_MS) : this.minRttIntervalMs;
      this.nextMeasurementAt = now + interval * (1 - JITTER + 2 * JITTER * this.random());
      return;
    }
    this.windowStartedAt ??= now;
    if (now - this.windowStartedAt < this.windowMs) return;
    const windowRtt = percentileOf(this.samples.sort((a, b) => a - b), this.percentile);
    this.samples = [];
    this.windowStartedAt = now;
    const target = this.minRttMs * (1 + this.buffer);
    const gradient = Math.max(0.5, Math.min(2, target / Math.max(windowRtt, Number.EPSILON)));
    const scaled = this.limitValue * gradient;
    const next = this.clamp(scaled + Math.sqrt(scaled));
    // Grow only when the limit is what holds requests back: while fewer than half of it were in
    // use, a fast window says nothing about more load (and a sudden burst must not find it huge).
    if (next < this.limitValue || this.windowPeakInflight >= this.limitValue / 2) this.limitValue = next;
    this.windowPeakInflight = this.inflightCount;
    this.windowsAtMin = this.limitValue <= this.options.minLimit ? this.windowsAtMin + 1 : 0;
    if (now >= this.nextMeasurementAt || this.windowsAtMin >= WINDOWS_AT_MIN_BEFORE_REMEASURE) this.startMeasuring();
  }
}

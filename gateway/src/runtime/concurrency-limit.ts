// Adaptive concurrency limit (after Netflix's concurrency-limits "Gradient2" and Envoy's adaptive
// concurrency filter): the gateway admits at most `limit` requests at once and sheds the rest at
// once with 503 instead of queueing them. The limit follows latency: while recent round trips stay
// near the long-term average it grows; when they stretch (a queue is forming upstream) it shrinks.

export interface ConcurrencyLimitOptions {
  initialLimit: number;
  minLimit: number;
  maxLimit: number;
  /** How much slower than the long-term average recent latency may get before the limit shrinks. */
  tolerance?: number;
  /** Samples per adjustment. */
  window?: number;
}

export class AdaptiveConcurrencyLimit {
  private limitValue: number;
  private inflightCount = 0;
  private longRtt = 0;
  private windowSum = 0;
  private windowCount = 0;
  private readonly tolerance: number;
  private readonly window: number;

  constructor(private readonly options: ConcurrencyLimitOptions) {
    this.limitValue = options.initialLimit;
    this.tolerance = options.tolerance ?? 2;
    this.window = options.window ?? 50;
  }

  get limit(): number {
    return Math.floor(this.limitValue);
  }

  get inflight(): number {
    return this.inflightCount;
  }

  /** A release function to call with the outcome, or undefined when the request must be shed. */
  tryAcquire(now: () => number = performance.now.bind(performance)): ((ok: boolean) => void) | undefined {
    if (this.inflightCount >= this.limit) return undefined;
    this.inflightCount++;
    const started = now();
    let released = false;
    return (ok: boolean) => {
      if (released) return;
      released = true;
      this.inflightCount--;
      // Only answers that did the work measure the upstream; fast failures would flatter it.
      if (ok) this.sample(now() - started);
    };
  }

  private sample(rttMs: number): void {
    this.windowSum += rttMs;
    this.windowCount++;
    if (this.windowCount < this.window) return;
    const shortRtt = this.windowSum / this.windowCount;
    this.windowSum = 0;
    this.windowCount = 0;
    this.longRtt = this.longRtt === 0 ? shortRtt : this.longRtt * 0.95 + shortRtt * 0.05;
    // Recover slowly after a long overload: the long-term average must not learn the bad latency.
    if (this.longRtt / shortRtt > 2) this.longRtt *= 0.9;
    const gradient = Math.max(0.5, Math.min(1, (this.tolerance * this.longRtt) / shortRtt));
    const queueAllowance = Math.sqrt(this.limitValue);
    const next = this.limitValue * gradient + queueAllowance;
    this.limitValue = Math.max(this.options.minLimit, Math.min(this.options.maxLimit, this.limitValue * 0.8 + next * 0.2));
  }
}

// Event-loop-delay guard: when this process's event loop lags (it is saturated), new calls are
// refused at once with UNAVAILABLE / LOAD_SHED instead of joining an ever longer queue; callers
// back off (the gateway answers 503 with Retry-After). The least valuable go first: sheddable calls
// from half the threshold, default ones from the threshold, critical ones only from twice it.
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import { fail } from "./errors.js";
import { serviceShed } from "./metrics.js";
import type { Priority } from "./priority.js";

/** The lag, as a share of the threshold, from which calls of each priority are shed. */
const SHED_FROM: Readonly<Record<Priority, number>> = { sheddable: 0.5, default: 1, critical: 2 };

/**
 * How often the loop's delay is sampled: a tenth of the threshold, within 10–50 ms. The sampler is a
 * timer that wakes the process each time, idle or not: at 10 ms an idle service woke 100 times a
 * second and spent ~9 ms of CPU a second on it (measured), taken from the busy processes beside it on
 * a small node. A lag of half the default threshold (250 ms) is still seen to within 50 ms.
 */
export const sampleEveryMs = (thresholdMs: number): number => Math.min(50, Math.max(10, Math.floor(thresholdMs / 10)));

export class EventLoopGuard {
  private readonly histogram: IntervalHistogram;
  private readonly timer: NodeJS.Timeout;
  private lagMs = 0;
  private previousLagMs = 0;

  /** thresholdMs: p99 event-loop delay over one window above which new calls are shed. */
  constructor(
    private readonly thresholdMs: number,
    windowMs = 500,
  ) {
    this.histogram = monitorEventLoopDelay({ resolution: sampleEveryMs(thresholdMs) });
    this.histogram.enable();
    this.timer = setInterval(() => {
      this.previousLagMs = this.lagMs;
      this.lagMs = this.histogram.percentile(99) / 1e6;
      this.histogram.reset();
    }, windowMs).unref();
  }

  /** The p99 event-loop delay of the last window, in ms. */
  get lag(): number {
    return this.lagMs;
  }

  /**
   * Throws LOAD_SHED while the loop is lagging beyond what the call's priority bears: in two windows
   * running, so that one pause (a long GC, a stopped-and-resumed process) does not turn into
   * refusals; saturation lasts.
   */
  admit(priority: Priority = "default"): void {
    const bearable = this.thresholdMs * SHED_FROM[priority];
    if (this.lagMs > bearable && this.previousLagMs > bearable) {
      serviceShed.inc({ priority });
      throw fail(
        "LOAD_SHED",
        `the service is overloaded (event loop ${Math.round(this.lagMs)} ms behind); retry after a short delay`,
      );
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.histogram.disable();
  }
}

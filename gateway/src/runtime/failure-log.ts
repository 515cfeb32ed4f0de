// Failed requests (5xx) in the log, without a flood of them — an outage, shedding under overload —
// costing more than the requests themselves: per error code, the first failure of each interval is
// logged in full and the rest are counted, then reported in one line when the interval ends.
import type { Logger } from "@switchyard/platform/logger.js";

interface Window {
  until: number;
  suppressed: number;
}

export class FailureLog {
  private readonly windows = new Map<string, Window>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 1_000,
    private readonly now: () => number = Date.now,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs).unref();
  }

  /** `fields` is called only for a failure that is logged in full (most are only counted). */
  report(code: string, fields: () => Record<string, unknown>): void {
    const now = this.now();
    const window = this.windows.get(code);
    if (window && now < window.until) {
      window.suppressed++;
      return;
    }
    if (window) this.reportSuppressed(code, window);
    this.windows.set(code, { until: now + this.intervalMs, suppressed: 0 });
    this.logger.warn({ code, ...fields() }, "request failed");
  }

  /** Reports the counts of intervals that have ended. */
  flush(force = false): void {
    const now = this.now();
    for (const [code, window] of this.windows) {
      if (!force && now < window.until) continue;
      this.reportSuppressed(code, window);
      this.windows.delete(code);
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.flush(true);
  }

  private reportSuppressed(code: string, window: Window): void {
    if (window.suppressed > 0)
      this.logger.warn(
        { code, count: window.suppressed, intervalMs: this.intervalMs },
        "more requests failed with this code (not logged one by one)",
      );
    window.suppressed = 0;
  }
}

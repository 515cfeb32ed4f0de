// Latency samples in microseconds (node's HDR histogram), reported in milliseconds.
import { createHistogram, type RecordableHistogram } from "node:perf_hooks";

export class Latencies {
  private readonly histogram: RecordableHistogram = createHistogram();

  /** One sample, in milliseconds (fractions kept to the microsecond). */
  record(ms: number): void {
    this.histogram.record(Math.max(1, Math.round(ms * 1_000)));
  }

  get count(): number {
    return this.histogram.count;
  }

  /** The largest sample in milliseconds. */
  get maxMs(): number {
    return this.count === 0 ? NaN : this.histogram.max / 1_000;
  }

  /** The given percentile (0–100) in milliseconds. */
  percentileMs(p: number): number {
    return this.count === 0 ? NaN : this.histogram.percentile(p) / 1_000;
  }
}

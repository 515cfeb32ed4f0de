// A Prometheus histogram for the per-request paths. prom-client's Histogram validates and hashes the
// label set on every observation, even through a child (a few µs: with two per request in a process,
// 2–3 % of a read's CPU); here a label set is resolved once, to its child, and an observation is a
// bucket search and three additions. It registers into a prom-client Registry like any metric and is
// exported in the same text format (cumulative `_bucket{le}`, `_sum`, `_count`).
import type { Registry } from "prom-client";

class Child {
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Record<string, string>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** A histogram as prom-client's configuration names it: its buckets' upper bounds, the registry it goes in. */
export interface LabeledHistogramConfig<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  buckets: readonly number[];
  registry: Registry;
}

export class LabeledHistogram<L extends string> {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  private readonly bounds: readonly number[];
  private readonly children = new Map<string, Child>();

  constructor(config: LabeledHistogramConfig<L>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    this.bounds = config.buckets;
    config.registry.registerMetric(this as never);
  }

  /** The child of one label set: keep it, and observe through it. */
  labels(labels: Record<L, string>): { observe(value: number): void } {
    const key = this.labelNames.map((n) => labels[n]).join("\u0000");
    let child = this.children.get(key);
    if (!child) {
      child = new Child(Object.fromEntries(this.labelNames.map((n) => [n, labels[n]])), this.bounds);
      this.children.set(key, child);
    }
    return child;
  }

  /** What the registry exports (prom-client's metric shape). */
  get(): {
    name: string;
    help: string;
    type: string;
    aggregator: string;
    values: { labels: Record<string, string | number>; value: number; metricName: string }[];
  } {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const child of this.children.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += child.counts[i]!;
        values.push({
          labels: { le: i < this.bounds.length ? this.bounds[i]! : "+Inf", ...child.labels },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      }
      values.push({ labels: child.labels, value: child.sum, metricName: `${this.name}_sum` });
      values.push({ labels: child.labels, value: child.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.children.clear();
  }
}

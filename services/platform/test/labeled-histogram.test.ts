// The per-request histogram (labeled-histogram.ts) against prom-client's own Histogram: the same
// observations give the same exported text — buckets cumulative with +Inf, _sum, _count, per label set.
import { expect } from "chai";
import { Histogram, Registry } from "prom-client";
import { LabeledHistogram } from "../src/labeled-histogram.js";

describe("platform: LabeledHistogram", () => {
  const BUCKETS = [0.001, 0.01, 0.1, 1];
  const observations: [Record<"route" | "code", string>, number][] = [
    [{ route: "/v1/a", code: "2xx" }, 0.0005],
    [{ route: "/v1/a", code: "2xx" }, 0.001], // on a bound: counted in it (le is inclusive)
    [{ route: "/v1/a", code: "2xx" }, 0.05],
    [{ route: "/v1/a", code: "5xx" }, 3],
    [{ route: "/v1/b", code: "2xx" }, 0.2],
    [{ route: "/v1/a", code: "2xx" }, 7],
  ];

  it("exports what prom-client's Histogram exports for the same observations", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const fast = new LabeledHistogram({
      name: "x_seconds",
      help: "help text",
      labelNames: ["route", "code"] as const,
      buckets: BUCKETS,
      registry: ours,
    });
    const reference = new Histogram({
      name: "x_seconds",
      help: "help text",
      labelNames: ["route", "code"] as const,
      buckets: BUCKETS,
      registers: [theirs],
    });
    for (const [labels, value] of observations) {
      fast.labels(labels).observe(value);
      reference.observe(labels, value);
    }
    const sorted = (text: string) => text.split("\n").filter(Boolean).sort();
    expect(sorted(await ours.metrics())).to.deep.equal(sorted(await theirs.metrics()));
    expect(await ours.metrics()).to.include('x_seconds_bucket{le="+Inf",route="/v1/a",code="2xx"} 4');
  });

  it("keeps one child per label set, whatever order the labels come in, and forgets them on reset", async () => {
    const registry = new Registry();
    const h = new LabeledHistogram({
      name: "y_seconds",
      help: "help",
      labelNames: ["a", "b"] as const,
      buckets: BUCKETS,
      registry,
    });
    h.labels({ a: "1", b: "2" }).observe(0.5);
    h.labels({ b: "2", a: "1" }).observe(0.5);
    expect(await registry.metrics()).to.include('y_seconds_count{a="1",b="2"} 2');
    registry.resetMetrics();
    expect(await registry.metrics()).to.not.include("y_seconds_count");
  });
});

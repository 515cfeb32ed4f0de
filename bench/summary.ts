// The last table `npm run bench` prints: every figure that has a target, the target, and whether it
// is met — PASS, MISS, or "not measured" (a scenario failed or was left out with BENCH_ONLY) — and
// the figures printed for their own sake, marked "no target". Run on several runtimes, each figure
// has a line per runtime.
// The sections above it give each figure's context; docs/benchmarks.md says how to read them.
export interface SummaryRow {
  /** The issue that set the target ("#15"), or "earlier" for one from before the issue tracker. */
  issue: string;
  figure: string;
  /** The measured value, formatted; undefined when it was not measured this run. */
  value: string | undefined;
  /** The target, or NO_TARGET for a figure reported for its own sake (sizing, scale-out). */
  target: string;
  pass: boolean | undefined;
  /**
   * A target met when it is met on any one runtime (issue 46's same-work ratio: on at least one of the
   * two): the summary by runtime ends with which runtimes meet it.
   */
  onAnyRuntime?: boolean;
}

export const NO_TARGET = "no target";

/** One runtime's summary: its rows, or why there are none (its run failed). */
export interface RuntimeSummary {
  /** "Node 24.18.1 (the image's)". */
  runtime: string;
  rows: SummaryRow[] | { error: string };
}

const verdict = (r: SummaryRow) =>
  r.value === undefined ? "not measured" : r.target === NO_TARGET ? "–" : r.pass ? "PASS" : "MISS";

function tally(rows: SummaryRow[]): string {
  const targeted = rows.filter((r) => r.target !== NO_TARGET);
  const met = targeted.filter((r) => r.value !== undefined && r.pass).length;
  const measured = targeted.filter((r) => r.value !== undefined).length;
  return `${met} of ${measured} measured figures meet their target (${targeted.length - measured} not measured; ${rows.length - targeted.length} figures without a target)`;
}

function formatTable(header: string[], table: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" │ ")}`;
  return [line(header), `  ${widths.map((w) => "─".repeat(w)).join("─┼─")}`, ...table.map(line)];
}

export function formatSummary(rows: SummaryRow[], runtime: string): string {
  const table = rows.map((r) => [r.issue, r.figure, r.value ?? "–", r.target, verdict(r)]);
  return [
    `Summary on ${runtime} — ${tally(rows)}`,
    ...formatTable(["issue", "figure", "measured", "target", "verdict"], table),
  ].join("\n");
}

/** Every runtime's summary in one table: a figure's line per runtime, one under the other. */
export function formatSummaryByRuntime(summaries: RuntimeSummary[]): string {
  const byFigure = new Map<string, string[][]>();
  for (const { runtime, rows } of summaries) {
    if ("error" in rows) continue;
    for (const r of rows) {
      const key = `${r.issue} ${r.figure}`;
      const lines = byFigure.get(key) ?? byFigure.set(key, []).get(key)!;
      const first = lines.length === 0;
      lines.push([first ? r.issue : "", first ? r.figure : "", runtime, r.value ?? "–", r.target, verdict(r)]);
    }
  }
  return [
    "Summary, by runtime —",
    ...summaries.map(({ runtime, rows }) => `  ${runtime}: ${"error" in rows ? rows.error : tally(rows)}`),
    ...formatTable(["issue", "figure", "runtime", "measured", "target", "verdict"], [...byFigure.values()].flat()),
    ...onAnyRuntimeVerdicts(summaries),
  ].join("\n");
}

/** For each figure whose target one runtime is enough to meet: on which runtimes it is met, if any. */
function onAnyRuntimeVerdicts(summaries: RuntimeSummary[]): string[] {
  const byFigure = new Map<string, { row: SummaryRow; metOn: string[]; measuredOn: number }>();
  for (const { runtime, rows } of summaries) {
    if ("error" in rows) continue;
    for (const r of rows.filter((row) => row.onAnyRuntime)) {
      const key = `${r.issue} ${r.figure}`;
      const entry = byFigure.get(key) ?? byFigure.set(key, { row: r, metOn: [], measuredOn: 0 }).get(key)!;
      if (r.value !== undefined) entry.measuredOn++;
      if (r.value !== undefined && r.pass) entry.metOn.push(runtime);
    }
  }
  return [...byFigure.values()].map(({ row, metOn, measuredOn }) => {
    const verdict =
      metOn.length > 0
        ? `PASS, on ${metOn.join(" and on ")}`
        : measuredOn === 0
          ? "not measured"
          : `MISS, on each of the ${measuredOn} runtime${measuredOn === 1 ? "" : "s"} measured`;
    return `  ${row.issue} ${row.figure}, ${row.target} on one runtime: ${verdict}`;
  });
}

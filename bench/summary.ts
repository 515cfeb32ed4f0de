// The last table `npm run bench` prints: every figure that has a target, the target, and whether it
// is met — PASS, MISS, or "not measured" (a scenario failed or was left out with BENCH_ONLY) — and
// the figures printed for their own sake, marked "no target".
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
}

export const NO_TARGET = "no target";

export function formatSummary(rows: SummaryRow[]): string {
  const verdict = (r: SummaryRow) =>
    r.value === undefined ? "not measured" : r.target === NO_TARGET ? "–" : r.pass ? "PASS" : "MISS";
  const table = rows.map((r) => [r.issue, r.figure, r.value ?? "–", r.target, verdict(r)]);
  const header = ["issue", "figure", "measured", "target", "verdict"];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" │ ")}`;
  const targeted = rows.filter((r) => r.target !== NO_TARGET);
  const met = targeted.filter((r) => r.value !== undefined && r.pass).length;
  const measured = targeted.filter((r) => r.value !== undefined).length;
  return [
    `Summary — ${met} of ${measured} measured figures meet their target (${targeted.length - measured} not measured; ${rows.length - targeted.length} figures without a target)`,
    line(header),
    `  ${widths.map((w) => "─".repeat(w)).join("─┼─")}`,
    ...table.map(line),
  ].join("\n");
}

// The benchmark on several runtimes (issue 46): its last table puts each figure's line per runtime
// one under the other and says which runtime a line is from, and a runtime whose run failed says so.
import { expect } from "chai";
import { formatSummaryByRuntime, NO_TARGET, type SummaryRow } from "../bench/summary.js";

const row = (figure: string, value: string | undefined, pass: boolean | undefined): SummaryRow => ({
  issue: "#34",
  figure,
  value,
  target: pass === undefined ? NO_TARGET : "≥ 0.85",
  pass,
});

describe("bench: the summary by runtime", () => {
  it("lists each figure once per runtime, under its first line, naming the runtime", () => {
    const table = formatSummaryByRuntime([
      { runtime: "Node 20.20.2", rows: [row("read ÷ reference", "0.79", false), row("CPU ms", "1.2", undefined)] },
      { runtime: "Node 24.18.1 (the image's)", rows: [row("read ÷ reference", "0.91", true)] },
    ]).split("\n");
    expect(table[1]).to.include("Node 20.20.2: 0 of 1 measured figures meet their target");
    expect(table[2]).to.include("Node 24.18.1 (the image's): 1 of 1 measured figures meet their target");
    const lines = table.slice(5).map((line) => line.split("│").map((cell) => cell.trim()));
    expect(lines).to.deep.equal([
      ["#34", "read ÷ reference", "Node 20.20.2", "0.79", "≥ 0.85", "MISS"],
      ["", "", "Node 24.18.1 (the image's)", "0.91", "≥ 0.85", "PASS"],
      ["#34", "CPU ms", "Node 20.20.2", "1.2", NO_TARGET, "–"],
    ]);
  });

  it("ends with the runtimes that meet a target one runtime is enough for, or that none does", () => {
    const anyRuntime = (value: string | undefined, pass: boolean | undefined): SummaryRow => ({
      ...row("lowest read ÷ reference", value, pass),
      issue: "#46",
      target: "≥ 0.9",
      onAnyRuntime: true,
    });
    const verdictOf = (summaries: Parameters<typeof formatSummaryByRuntime>[0]) =>
      formatSummaryByRuntime(summaries).split("\n").at(-1)!.trim();
    expect(
      verdictOf([
        { runtime: "Node 20.20.2", rows: [anyRuntime("0.91", true)] },
        { runtime: "Node 24.18.1 (the image's)", rows: [anyRuntime("0.83", false)] },
      ]),
    ).to.equal("#46 lowest read ÷ reference, ≥ 0.9 on one runtime: PASS, on Node 20.20.2");
    expect(
      verdictOf([
        { runtime: "Node 20.20.2", rows: [anyRuntime("0.85", false)] },
        { runtime: "Node 24.18.1 (the image's)", rows: [anyRuntime("0.82", false)] },
      ]),
    ).to.equal("#46 lowest read ÷ reference, ≥ 0.9 on one runtime: MISS, on each of the 2 runtimes measured");
    expect(
      verdictOf([
        { runtime: "Node 20.20.2", rows: [anyRuntime(undefined, false)] },
        { runtime: "Node 24.18.1 (the image's)", rows: { error: "its run ended without a summary (code 1)" } },
      ]),
    ).to.equal("#46 lowest read ÷ reference, ≥ 0.9 on one runtime: not measured");
  });

  it("says which runtime's run ended without a summary", () => {
    const table = formatSummaryByRuntime([
      { runtime: "Node 24.18.1 (the image's)", rows: { error: "its run ended without a summary (code 1)" } },
    ]);
    expect(table).to.include("Node 24.18.1 (the image's): its run ended without a summary (code 1)");
  });
});

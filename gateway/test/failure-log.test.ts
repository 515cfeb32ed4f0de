// Failed requests in the log: each code's first failure of an interval in full, the rest counted.
import { expect } from "chai";
import { Writable } from "node:stream";
import { createLogger } from "@switchyard/platform/logger.js";
import { FailureLog } from "../src/runtime/failure-log.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger("gateway-test", "info", stream) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("failure log", () => {
  it("logs the first failure of each code per interval in full and counts the rest into one line", async () => {
    const { lines, logger } = capture();
    const clock = { now: 0 };
    const log = new FailureLog(logger, 1_000, () => clock.now);
    try {
      let described = 0;
      for (let i = 0; i < 500; i++)
        log.report("LOAD_SHED", () => (described++, { status: 503, path: "/v1/payments/x" }));
      expect(described, "only the failure logged in full is described").to.equal(1);
      log.report("UPSTREAM_UNAVAILABLE", () => ({ status: 502, path: "/v1/orders" }));
      log.report("UPSTREAM_UNAVAILABLE", () => ({ status: 502, path: "/v1/orders" }));
      await settle();
      expect(lines.map((l) => [l.msg, l.code])).to.deep.equal([
        ["request failed", "LOAD_SHED"],
        ["request failed", "UPSTREAM_UNAVAILABLE"],
      ]);
      expect(lines[0]).to.include({ status: 503, path: "/v1/payments/x", level: "warn" });

      clock.now = 999;
      log.flush();
      await settle();
      expect(lines, "nothing before the interval ends").to.have.length(2);

      clock.now = 1_000;
      log.flush();
      await settle();
      expect(lines.slice(2).map((l) => [l.code, l.count])).to.deep.equal([
        ["LOAD_SHED", 499],
        ["UPSTREAM_UNAVAILABLE", 1],
      ]);

      // A new interval starts with a full line again.
      log.report("LOAD_SHED", () => ({ status: 503 }));
      await settle();
      expect(lines.at(-1)).to.include({ msg: "request failed", code: "LOAD_SHED" });
    } finally {
      log.stop();
    }
  });

  it("reports what is still counted when it stops", async () => {
    const { lines, logger } = capture();
    const log = new FailureLog(logger, 60_000);
    for (let i = 0; i < 3; i++) log.report("DEADLINE_EXCEEDED", () => ({ status: 504 }));
    log.stop();
    await settle();
    expect(lines.map((l) => [l.code, l.count ?? "full"])).to.deep.equal([
      ["DEADLINE_EXCEEDED", "full"],
      ["DEADLINE_EXCEEDED", 2],
    ]);
  });
});

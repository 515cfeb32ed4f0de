// The deadline a service gives the calls it makes: what it has left less a margin in which it can
// still answer (an unreachable peer → 503 from the caller, not the 504 of the caller's own caller).
import { expect } from "chai";
import { DOWNSTREAM_MARGIN_MS, downstreamTimeoutMs } from "@switchyard/platform/call-deadline.js";

describe("downstreamTimeoutMs", () => {
  it("keeps a fifth of a short deadline to answer in", () => {
    expect(downstreamTimeoutMs(500)).to.equal(400);
    expect(downstreamTimeoutMs(10)).to.equal(8);
  });

  it("keeps at most DOWNSTREAM_MARGIN_MS of a long one", () => {
    expect(downstreamTimeoutMs(1_500)).to.equal(1_500 - DOWNSTREAM_MARGIN_MS);
    expect(downstreamTimeoutMs(5_000)).to.equal(5_000 - DOWNSTREAM_MARGIN_MS);
  });

  it("gives nothing once the deadline passed, and no deadline without one", () => {
    expect(downstreamTimeoutMs(0)).to.equal(0);
    expect(downstreamTimeoutMs(-30)).to.equal(0);
    expect(downstreamTimeoutMs(undefined)).to.equal(undefined);
  });
});

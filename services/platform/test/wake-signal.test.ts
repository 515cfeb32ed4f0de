// The pause a worker's loop waits in (the outbox relay's, the webhook delivery worker's): cut short by
// a rouse, over at its timer, and never slept through when the rouse came before the pause.
import { expect } from "chai";
import { WakeSignal } from "@switchyard/platform/wake-signal.js";

const elapsed = async (work: () => Promise<void>) => {
  const started = performance.now();
  await work();
  return performance.now() - started;
};

describe("WakeSignal", () => {
  it("ends a pause when roused", async () => {
    const signal = new WakeSignal();
    const ms = await elapsed(async () => {
      const paused = signal.pause(10_000);
      setTimeout(() => signal.rouse(), 20);
      await paused;
    });
    expect(ms).to.be.within(15, 5_000);
  });

  it("ends a pause at its timer when nothing rouses it", async () => {
    const ms = await elapsed(() => new WakeSignal().pause(40));
    expect(ms).to.be.at.least(35);
  });

  it("keeps a rouse that came while no pause waited: the next pause returns at once, the one after waits", async () => {
    const signal = new WakeSignal();
    signal.rouse();
    signal.rouse();
    expect(await elapsed(() => signal.pause(10_000))).to.be.below(1_000);
    expect(await elapsed(() => signal.pause(40))).to.be.at.least(35);
  });
});

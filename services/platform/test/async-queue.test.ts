// The push-to-pull queue behind server streams: order, close, fail — and a bound that ends a
// consumer fallen too far behind instead of holding ever more for it.
import { expect } from "chai";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";

describe("AsyncQueue", () => {
  it("hands items over in order, then ends", async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    q.push(2);
    q.close();
    const got: number[] = [];
    for await (const n of q) got.push(n);
    expect(got).to.deep.equal([1, 2]);
  });

  it("fails a consumer that falls more than the bound behind, dropping what waited, but not one that keeps up", async () => {
    const overflow = new Error("too far behind");
    const bounded = () =>
      new AsyncQueue<string>({ maxBuffered: 10, sizeOf: (s) => s.length, overflow: () => overflow });
    const slow = bounded();
    for (const s of ["aaaa", "bbbb", "cccc"]) slow.push(s);
    const err = await (async () => {
      for await (const _ of slow) expect.fail("nothing is handed over once the bound is passed");
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.equal(overflow);

    const steady = bounded();
    const got: string[] = [];
    const reading = (async () => {
      for await (const s of steady) got.push(s);
    })();
    for (let i = 0; i < 100; i++) {
      steady.push("abcd");
      await Promise.resolve();
    }
    steady.close();
    await reading;
    expect(got).to.have.length(100);
  });
});

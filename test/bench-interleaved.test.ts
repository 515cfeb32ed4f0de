// The benchmark's interleaved comparisons: a slice's lead-in loads its own target before the slice
// and is left out of what the slice measures, so that every side is measured already loaded.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "chai";
import { measureInterleaved, type Setup } from "../bench/load/interleaved.js";

/** A server that answers every request at once and notes when each came. */
async function countingServer(): Promise<{ server: Server; url: string; times: number[] }> {
  const times: number[] = [];
  const server = createServer((req, res) => {
    times.push(performance.now());
    req.resume();
    res.writeHead(200, { "content-type": "text/plain" }).end("ok");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/`, times };
}

/** How long, in s, the last run of requests lasted (a pause over 300 ms ends a run). */
function lastRunSeconds(times: number[]): number {
  let from = times.length - 1;
  while (from > 0 && times[from]! - times[from - 1]! < 300) from--;
  return (times.at(-1)! - times[from]!) / 1000;
}

async function compare(leadInSeconds: number) {
  const a = await countingServer();
  const b = await countingServer();
  const setup =
    (url: string): (() => Promise<Setup>) =>
    () =>
      Promise.resolve({ targets: { read: { url } }, processes: {}, stop: () => Promise.resolve() });
  try {
    const results = await measureInterleaved(
      { a: setup(a.url), b: setup(b.url) },
      { starts: 1, rounds: 1, sliceSeconds: 1, warmupSeconds: 1, leadInSeconds, connections: 4 },
    );
    return [a, b].map((server, i) => {
      const result = results[`${i === 0 ? "a" : "b"}/read`]!;
      return { requests: result.requests, seconds: result.seconds, lastRun: lastRunSeconds(server.times) };
    });
  } finally {
    a.server.close();
    b.server.close();
  }
}

describe("bench: interleaved slices", function () {
  this.timeout(30_000);

  // Each side: its warm-up, then (one round) its slice — after B's warm-up, so its slice starts a new run
  // of requests, which a lead-in makes 1 s longer than the slice alone.
  it("loads each target for the lead-in right before its slice, and measures the slice alone", async () => {
    for (const side of await compare(1)) {
      expect(side.requests, "requests measured").to.be.greaterThan(0);
      expect(side.seconds, "seconds measured").to.be.within(0.9, 1.5);
      expect(side.lastRun, "seconds of load before and in the slice").to.be.within(1.8, 3);
    }
  });

  it("without a lead-in, the slice's load is the slice", async () => {
    for (const side of await compare(0)) {
      expect(side.requests, "requests measured").to.be.greaterThan(0);
      expect(side.seconds, "seconds measured").to.be.within(0.9, 1.5);
      expect(side.lastRun, "seconds of load before and in the slice").to.be.below(1.5);
    }
  });
});

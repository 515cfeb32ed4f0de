// The event stream writer (runtime/sse.ts) over a real HTTP socket: a stream that breaks after it
// began says so in-band, repeating the last event id it wrote — or, with none written, the position it
// started after — and the reconnection time, so an EventSource reconnects with Last-Event-ID and
// misses nothing.
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fail } from "@switchyard/platform/errors.js";
import type { ServerSentEvent } from "../src/runtime/sse.js";
import { writeEventStream } from "../src/runtime/sse.js";

/** Serves one event stream: `events`, then the failure `err` (when given); answers with the body the client read. */
async function streamOnce(events: ServerSentEvent[], err: Error | undefined, lastEventId?: string): Promise<string> {
  const server: Server = createServer((req, res) => {
    const controller = new AbortController();
    async function* source() {
      yield* events;
      if (err !== undefined) throw err;
    }
    void writeEventStream(res, source(), undefined, {
      heartbeatMs: 60_000,
      signal: controller.signal,
      cancel: () => controller.abort(),
      lastEventId,
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    return await res.text();
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

const INTERRUPTED = 'data: {"error":"the live feed was interrupted; reconnect","code":"UPSTREAM_UNAVAILABLE"}';

describe("SSE writer: an in-band ending", () => {
  const dropped = fail("UPSTREAM_UNAVAILABLE", "content stayed away");

  it("repeats the last event id written and the reconnection time", async () => {
    const body = await streamOnce(
      [
        { id: "c1", event: "post", data: { n: 1 } },
        { id: "c2", event: "post", data: { n: 2 } },
      ],
      dropped,
      "c0",
    );
    expect(body.endsWith(`id: c2\nretry: 2000\nevent: error\n${INTERRUPTED}\n\n`), body).to.equal(true);
  });

  it("with no event written, gives the position the stream started after", async () => {
    const body = await streamOnce([], dropped, "c7");
    expect(body.endsWith(`id: c7\nretry: 2000\nevent: error\n${INTERRUPTED}\n\n`), body).to.equal(true);
  });

  it("with no position at all, gives none (the client keeps the one it has)", async () => {
    const body = await streamOnce([], dropped);
    expect(body.endsWith(`retry: 2000\nevent: error\n${INTERRUPTED}\n\n`), body).to.equal(true);
    expect(body).to.not.match(/^id:/m);
  });

  it("a stream whose source just ends says nothing more", async () => {
    const body = await streamOnce([{ id: "c1", event: "post", data: { n: 1 } }], undefined, "c0");
    expect(body).to.equal('retry: 2000\n\nid: c1\nevent: post\ndata: {"n":1}\n\n');
  });
});

// The tables every HTTP/2 call passes through (grpc/call-tables.ts): installed on this runtime, doing
// what Node's Map and Set did for Node's HTTP/2 session and grpc-js's transport, and keeping calls from
// being promoted once a full GC has run (a real HTTP/2 client and server in a child process).
import { expect } from "chai";
import { execFile } from "node:child_process";
import { connect, createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { installCallTables, Members, StreamsById } from "../src/grpc/call-tables.js";

const LOOP = new URL("./support/http2-call-loop.ts", import.meta.url).pathname;

/** Bytes promoted per request after a forced full GC, read off --trace-gc-nvp's scavenge lines. */
async function promotedPerRequest(mode: "tables" | "node", requests: number): Promise<number> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      "--expose-gc",
      "--trace-gc-nvp",
      "--no-allocation-site-pretenuring",
      "--import",
      "tsx",
      LOOP,
      mode,
      String(requests),
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const measured = stdout.slice(stdout.indexOf("MEASURED FROM HERE"));
  expect(measured, "the loop ran to its end").to.include(`DONE ${requests}`);
  let promoted = 0;
  for (const line of measured.split("\n"))
    if (/\bgc=s\b/.test(line)) promoted += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0);
  return promoted / requests;
}

describe("call tables (HTTP/2 sessions and grpc-js transports)", () => {
  it("are installed on this runtime, for both, once", () => {
    expect(installCallTables()).to.deep.equal({ sessions: true, transports: true });
    expect(installCallTables()).to.deep.equal({ sessions: true, transports: true });
  });

  it("StreamsById: get, set, delete and size as a Map; forEach in id order, a stream deleting itself on the way", () => {
    const table = new StreamsById<string>();
    for (const id of [1, 3, 5, 7]) table.set(id, `s${id}`);
    table.set(3, "s3 again");
    expect(table.size).to.equal(4);
    expect(table.get(3)).to.equal("s3 again");
    expect(table.has(9)).to.equal(false);
    expect(table.delete(9)).to.equal(false);
    const seen: [number, string][] = [];
    table.forEach((value, id) => {
      seen.push([id, value]);
      table.delete(id);
    });
    expect(seen).to.deep.equal([
      [1, "s1"],
      [3, "s3 again"],
      [5, "s5"],
      [7, "s7"],
    ]);
    expect(table.size).to.equal(0);
    expect([...table]).to.deep.equal([]);
  });

  it("Members: what a Set answers, over a long run of adds and deletes in any order", () => {
    const members = new Members<{ n: number }>();
    const reference = new Set<{ n: number }>();
    const items = Array.from({ length: 64 }, (_, n) => ({ n }));
    let seed = 7;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    for (let step = 0; step < 20_000; step++) {
      const item = items[next() % items.length]!;
      if (next() % 2 === 0) {
        members.add(item);
        reference.add(item);
      } else expect(members.delete(item)).to.equal(reference.delete(item));
      expect(members.size).to.equal(reference.size);
    }
    for (const item of items) expect(members.has(item)).to.equal(reference.has(item));
    const numbers = (of: Iterable<{ n: number }>) => [...of].map((i) => i.n).sort((a, b) => a - b);
    expect(numbers(members)).to.deep.equal(numbers(reference));
    const visited: number[] = [];
    members.forEach((item) => {
      visited.push(item.n);
      members.delete(item);
    });
    expect(visited.sort((a, b) => a - b)).to.deep.equal(numbers(reference));
    expect(members.size).to.equal(0);
    // One item in two sets: each keeps its own place.
    const other = new Members<{ n: number }>([items[0]!, items[1]!]);
    members.add(items[1]!);
    other.delete(items[0]!);
    expect([...members]).to.deep.equal([items[1]]);
    expect([...other]).to.deep.equal([items[1]]);
  });

  describe("in Node's HTTP/2 sessions", () => {
    let server: Http2Server;
    let url: string;
    const serverSessions = new Set<ServerHttp2Session>();
    before(async () => {
      installCallTables();
      server = createServer();
      server.on("session", (session) => serverSessions.add(session));
      server.on("stream", (stream, headers) => {
        if (headers[":path"] === "/hang") return; // never answered
        stream.respond({ ":status": 200 });
        stream.end("ok");
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      for (const session of serverSessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    it("carry requests both ways, and a destroyed session still ends the streams it held open", async () => {
      const session = connect(url);
      const get = (path: string) =>
        new Promise<string>((resolve, reject) => {
          const req = session.request({ ":path": path });
          let body = "";
          req.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
          req.on("close", () => resolve(body)); // closed: out of the session's tables
          req.on("error", reject);
        });
      expect(await Promise.all(Array.from({ length: 200 }, () => get("/")))).to.satisfy((bodies: string[]) =>
        bodies.every((b) => b === "ok"),
      );
      const state = Object.getOwnPropertySymbols(session).find((s) => s.description === "state")!;
      const tables = (session as unknown as Record<symbol, { streams: unknown; pendingStreams: unknown }>)[state]!;
      expect(tables.streams).to.be.instanceOf(StreamsById);
      expect(tables.pendingStreams).to.be.instanceOf(Members);

      const hanging = session.request({ ":path": "/hang" });
      const closed = new Promise<number | undefined>((resolve) => hanging.on("close", () => resolve(hanging.rstCode)));
      hanging.on("error", () => {});
      // The session is connected: the request is opened at once.
      expect((tables.streams as StreamsById<unknown>).size).to.equal(1);
      session.destroy();
      await closed;
      expect(hanging.destroyed).to.equal(true);
      expect((tables.streams as StreamsById<unknown>).size).to.equal(0);
    });
  });

  it("keep an HTTP/2 client's requests from being promoted after a full GC (Node's own tables promote them)", async function () {
    this.timeout(120_000);
    const REQUESTS = 20_000;
    const withTables = await promotedPerRequest("tables", REQUESTS);
    const withNodes = await promotedPerRequest("node", REQUESTS);
    console.log(
      `      bytes promoted per request after a full GC: ${withTables.toFixed(0)} with the tables, ${withNodes.toFixed(0)} with Node's`,
    );
    expect(withTables, "with the call tables").to.be.below(100);
    expect(withNodes, "with Node's Map and Set (the comparison can fail)").to.be.above(500);
  });
});

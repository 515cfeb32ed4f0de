// A connection closed after an answer sent before the request's body was read: the client still
// reads the answer (no reset under it), and the socket still closes — at once when the client closes
// its side, after LINGER_MS when it never does.
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { closeConnectionsLingering, LINGER_MS } from "../src/runtime/lingering-close.js";
import { sendWholeThenRead } from "../../test/support/send-whole-then-read.js";

const REFUSAL = JSON.stringify({ error: "the request body is larger than 65536 bytes", code: "PAYLOAD_TOO_LARGE" });

/** A server that refuses every request at once, without reading its body (as the edge does past a limit). */
async function refusingServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(REFUSAL) });
    res.end(REFUSAL);
  });
  closeConnectionsLingering(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** The server's open connections. */
const connections = (server: Server) =>
  new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));

describe("lingering close", function () {
  this.timeout(30_000);
  let server: Server;
  let port: number;
  beforeEach(async () => ({ server, port } = await refusingServer()));
  afterEach(() => {
    server.closeAllConnections();
    server.close();
  });

  it("lets a client that is still sending its body read an answer given before the body was read", async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => sendWholeThenRead(port, { path: "/v1/docs", headers: [], bodyBytes: 120_000 })),
    );
    for (const answer of answers) {
      expect(answer.split("\r\n")[0]).to.equal("HTTP/1.1 413 Payload Too Large");
      expect(answer.endsWith(`\r\n\r\n${REFUSAL}`), answer.slice(0, 300)).to.equal(true);
    }
  });

  it("closes as soon as the client has closed its side", async () => {
    await sendWholeThenRead(port, { path: "/v1/docs", headers: [], bodyBytes: 40_000 });
    const started = performance.now();
    while ((await connections(server)) > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(performance.now() - started).to.be.below(LINGER_MS / 2);
  });

  it("cuts off a client that never closes after LINGER_MS", async () => {
    const socket: Socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    const answered = new Promise<number>((resolve) => socket.once("data", () => resolve(performance.now())));
    socket.on("error", () => {});
    // Declares a body it never finishes sending, and never closes its side.
    socket.write("POST /v1/docs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 1000000\r\n\r\n{");
    const at = await answered;
    while ((await connections(server)) > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(performance.now() - at).to.be.within(LINGER_MS * 0.9, LINGER_MS * 3);
    socket.destroy();
  });
});

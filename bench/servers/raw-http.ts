// Baseline "raw": node:http answering a constant JSON body. The HTTP ceiling of this machine.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { closeServer, serve } from "./child.js";

const BODY = Buffer.from(JSON.stringify({ id: "pay_0000000000000000", status: "succeeded" }));
const HEADERS = { "content-type": "application/json; charset=utf-8", "content-length": BODY.length };

serve("raw-http", async () => {
  const server = createServer((_req, res) => {
    res.writeHead(200, HEADERS);
    res.end(BODY);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, stop: () => closeServer(server) };
});

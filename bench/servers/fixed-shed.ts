// Reference "shed floor" (issue 15): node:http answering every request with the gateway's load-shed
// refusal — the same status, headers and body, a fresh request id each time — and nothing else. Offered
// the overload's rate by the same generator, on the mesh's core alone, its p99 is the least a shed
// answer's p99 can be on this machine, whatever the gateway does.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { closeServer, serve } from "./child.js";

const BODY = JSON.stringify({
  error: "the gateway is at capacity; retry after the Retry-After delay",
  code: "LOAD_SHED",
});

serve("fixed-shed", async () => {
  const server = createServer((req, res) => {
    req.resume();
    res.setHeader("x-request-id", randomUUID());
    res.setHeader("vary", "Accept");
    res.setHeader("x-ratelimit-limit", "1000000");
    res.setHeader("x-ratelimit-remaining", "999999");
    res.setHeader("x-ratelimit-reset", String(Math.ceil(Date.now() / 1000) + 60));
    res.setHeader("retry-after", "1");
    res.setHeader("content-type", "application/json; charset=utf-8");
    res.setHeader("content-length", Buffer.byteLength(BODY));
    res.writeHead(503);
    res.end(BODY);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, stop: () => closeServer(server) };
});

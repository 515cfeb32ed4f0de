// Baseline "bare hop": node:http that makes one unary grpc-js Echo call per request to the
// EchoService in another process (ECHO_ADDRESS) over one long-lived channel, then answers JSON.
// The gateway's shape with nothing but the transport (the project's own gRPC client, against
// echo-grpcjs.ts on its own server bootstrap): B's scenario 2. The same-work reference, which
// does the read paths' store read with the libraries alone, is same-work-front.ts → same-work-read.ts.
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { EchoService } from "@switchyard/platform/echo.js";
import { closeServer, serve } from "./child.js";

function answer(res: ServerResponse, body: string): void {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function failed(res: ServerResponse, err: unknown): void {
  res.writeHead(502, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify({ error: String(err) }));
}

serve("bare-hop", async () => {
  const address = process.env.ECHO_ADDRESS;
  if (!address) throw new Error("ECHO_ADDRESS is required");
  const channel = openChannel(address);
  const echo = createServiceClient(EchoService, channel);
  const server = createServer((_req, res) => {
    echo.echo({ message: "pay_0000000000000000" }).then(
      (reply) => answer(res, JSON.stringify({ id: reply.message, status: "succeeded" })),
      (err: unknown) => failed(res, err),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      await closeServer(server);
      channel.close();
    },
  };
});

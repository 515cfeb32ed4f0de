// EchoService on @connectrpc/connect-node: node:http2 in plain h2c, same implementation.
import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { echoImpl, EchoService } from "@switchyard/platform/echo.js";
import { serve } from "./child.js";

serve("echo-connect", async () => {
  const server = createServer(connectNodeAdapter({ routes: (router) => router.service(EchoService, echoImpl()) }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, stop: () => closeHttp2(server) };
});

/** node:http2 has no closeAllConnections: close the server and let the sessions go. */
function closeHttp2(server: ReturnType<typeof createServer>): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

// A port of 127.0.0.1 nobody listens on now, for a server a test starts itself (which binds it a
// moment later: should another process take it first, the start fails and the caller tries again).
import { createServer, type AddressInfo } from "node:net";

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

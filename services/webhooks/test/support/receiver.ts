// A partner's receiver for the tests, on 127.0.0.1 (or ::1): it answers each request with `respond` once the
// body is read, keeps what it received (headers as strings, as a verifier takes them) and counts the
// connections made to it.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  headers: Record<string, string>;
  body: string;
}

export interface TestReceiver {
  url: string;
  port: number;
  received: Received[];
  connections(): number;
  close(): Promise<void>;
}

export async function startReceiver(
  respond: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => void res.writeHead(204).end(),
  host: "127.0.0.1" | "::1" = "127.0.0.1",
): Promise<TestReceiver> {
  const received: Received[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
        body: Buffer.concat(chunks).toString("utf8"),
      });
      respond(req, res);
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host === "::1" ? "[::1]" : host}:${port}/hook`,
    port,
    received,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

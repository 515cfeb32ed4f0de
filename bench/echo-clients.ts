// The two gRPC clients compared in part A, both calling the same unary Echo.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { EchoService } from "@switchyard/platform/echo.js";

export type ClientKind = "grpc-js" | "connect";

export interface EchoClient {
  call(): Promise<unknown>;
  close(): void;
}

const REQUEST = { message: "hello", delayMs: 0 };

export function echoClient(kind: ClientKind, address: string): EchoClient {
  if (kind === "grpc-js") {
    // Ours: platform's typed client over one long-lived grpc-js channel.
    const channel = openChannel(address);
    const client = createServiceClient(EchoService, channel);
    return { call: () => client.echo(REQUEST), close: () => channel.close() };
  }
  const baseUrl = `http://${address}`;
  const sessionManager = new Http2SessionManager(baseUrl);
  const client = createClient(EchoService, createGrpcTransport({ baseUrl, sessionManager }));
  return { call: () => client.echo(REQUEST), close: () => sessionManager.abort() };
}

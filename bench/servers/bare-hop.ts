// Baseline "bare hop": node:http that makes one unary grpc-js Echo call per request to the
// EchoService in another process (ECHO_ADDRESS) over one long-lived channel, then answers JSON.
// The gateway's shape with nothing but the transport: its req/s is the ceiling of the real path.
// With ANSWER=record (behind store-read-grpcjs.ts with ANSWER=record) it calls the real service's
// GetPayment or GetDocument (READ) instead and answers the record as the gateway represents it —
// the same payload end to end, without the gateway's policy (auth, quota, limits, validation,
// headers, metrics).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { EchoService } from "@switchyard/platform/echo.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { paymentJson } from "@switchyard/gateway/representations/payments.js";
import { documentJson } from "@switchyard/gateway/representations/content.js";
import { closeServer, serve } from "./child.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

function answer(res: ServerResponse, body: string, headers?: Record<string, string>): void {
  const head = { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) };
  res.writeHead(200, headers ? { ...headers, ...head } : head);
  res.end(body);
}

function failed(res: ServerResponse, err: unknown): void {
  res.writeHead(502, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify({ error: String(err) }));
}

/**
 * One upstream call per request, over one long-lived channel, answered as JSON. The ids asked for
 * are placeholders: the store-read server answers its one record whatever the request says.
 */
function handlerOf(channel: ReturnType<typeof openChannel>, answerRecord: boolean, read: string | undefined): Handler {
  if (!answerRecord) {
    const echo = createServiceClient(EchoService, channel);
    return (_req, res) => {
      echo.echo({ message: "pay_0000000000000000" }).then(
        (reply) => answer(res, JSON.stringify({ id: reply.message, status: "succeeded" })),
        (err: unknown) => failed(res, err),
      );
    };
  }
  if (read === "document") {
    const content = createServiceClient(ContentService, channel);
    return (_req, res) => {
      content.getDocument({ documentId: "doc_0000000000000000" }).then(
        ({ document }) => answer(res, JSON.stringify(documentJson(document!)), { etag: document!.etag }),
        (err: unknown) => failed(res, err),
      );
    };
  }
  const payments = createServiceClient(PaymentService, channel);
  return (_req, res) => {
    payments.getPayment({ paymentId: "pay_0000000000000000" }).then(
      ({ payment }) => answer(res, JSON.stringify(paymentJson(payment!))),
      (err: unknown) => failed(res, err),
    );
  };
}

serve("bare-hop", async () => {
  const address = process.env.ECHO_ADDRESS;
  if (!address) throw new Error("ECHO_ADDRESS is required");
  const channel = openChannel(address);
  const server = createServer(handlerOf(channel, process.env.ANSWER === "record", process.env.READ));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      await closeServer(server);
      channel.close();
    },
  };
});

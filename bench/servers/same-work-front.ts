// The same-work reference's front (issue 34): node:http making one unary @grpc/grpc-js call per
// request to same-work-read.ts (READ_ADDRESS) over one channel, on the library's defaults, JSON out.
//   GET /id/payments/{id}, /id/docs/{id}          R:  answers the id (a document's with its ETag)
//   GET /record/payments/{id}, /record/docs/{id}  R+: answers the whole record as the gateway
//       represents it (its fields and names, amounts as numbers, the status from what was refunded)
// No auth, quota, limits, validation, request ids or metrics: the gateway's shape with nothing but
// the transport. Imports nothing of the project (test/same-work-reference.test.ts checks).
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { closeServer, serve } from "./child.js";
import { READS, type DocumentRow, type IdReply, type PaymentRow, type ReadName } from "./same-work-rpc.js";

const ROUTE = /^\/(id|record)\/(payments|docs)\/([^/?]+)$/;

function call<R>(client: grpc.Client, name: ReadName, id: string): Promise<R> {
  const method = READS[name];
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(method.path, method.requestSerialize, method.responseDeserialize, { id }, (err, value) =>
      err ? reject(err) : resolve(value as R),
    ),
  );
}

function answer(res: ServerResponse, status: number, body: unknown, etag?: string): void {
  const text = JSON.stringify(body);
  const head: Record<string, string | number> = {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  };
  if (etag) head.etag = etag;
  res.writeHead(status, head);
  res.end(text);
}

function paymentStatus(p: PaymentRow): string {
  if (p.amount_refunded === "0") return "succeeded";
  return p.amount_refunded === p.amount ? "refunded" : "partially_refunded";
}

/** The gateway's JSON representation of a payment. */
function paymentJson(p: PaymentRow) {
  return {
    id: p.id,
    amount: Number(p.amount),
    currency: p.currency,
    source: p.source,
    status: paymentStatus(p),
    amount_refunded: Number(p.amount_refunded),
    user_id: p.owner_user_id === "0" ? null : Number(p.owner_user_id),
    reference: p.reference === "" ? null : p.reference,
    created_at: p.created_at,
  };
}

/** The gateway's JSON representation of a document (its entity tag goes in ETag). */
function documentJson(d: DocumentRow) {
  return { id: d.id, title: d.title, body: d.body, created_at: d.created_at, updated_at: d.updated_at };
}

async function respond(
  client: grpc.Client,
  view: string,
  kind: string,
  encodedId: string,
  res: ServerResponse,
): Promise<void> {
  const id = decodeURIComponent(encodedId);
  if (kind === "payments") {
    if (view === "id") return answer(res, 200, { id: (await call<IdReply>(client, "payment", id)).id });
    return answer(res, 200, paymentJson(await call<PaymentRow>(client, "paymentRecord", id)));
  }
  if (view === "id") {
    const reply = await call<IdReply>(client, "document", id);
    return answer(res, 200, { id: reply.id }, reply.etag);
  }
  const doc = await call<DocumentRow>(client, "documentRecord", id);
  return answer(res, 200, documentJson(doc), doc.etag);
}

serve("same-work-front", async () => {
  const address = process.env.READ_ADDRESS;
  if (!address) throw new Error("READ_ADDRESS is required");
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const server = createServer((req, res) => {
    const route = ROUTE.exec(req.url ?? "");
    if (!route) return answer(res, 404, { error: "no such route" });
    respond(client, route[1]!, route[2]!, route[3]!, res).catch((err: unknown) => {
      const notFound = (err as { code?: unknown }).code === grpc.status.NOT_FOUND;
      answer(res, notFound ? 404 : 502, { error: String(err) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async stop() {
      await closeServer(server);
      client.close();
    },
  };
});

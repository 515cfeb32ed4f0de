// The same-work reference's one gRPC service, shared by its two processes (same-work-front.ts →
// same-work-read.ts): four unary methods whose messages are JSON in gRPC's framing — @grpc/grpc-js
// with a codec of its own, no protobuf. Like every same-work-* file it imports nothing of the project
// (test/same-work-reference.test.ts checks): the reference is what the libraries alone cost.
import type { ServiceDefinition } from "@grpc/grpc-js";

/** Every call asks for one record by id; the tenant is the read server's own (the mesh's comes from the caller's token). */
export interface ReadRequest {
  id: string;
}

/** R: the record's id (and a document's entity tag, which the mesh's document read computes too). */
export interface IdReply {
  id: string;
  etag?: string;
}

/** R+: the payment row as read, int8 columns as text, times as RFC 3339. */
export interface PaymentRow {
  id: string;
  tenant_id: string;
  amount: string;
  currency: string;
  source: string;
  amount_refunded: string;
  owner_user_id: string;
  reference: string;
  created_at: string;
}

/** R+: the document row as read, with its entity tag. */
export interface DocumentRow {
  id: string;
  tenant_id: string;
  title: string;
  body: string;
  version: number;
  created_at: string;
  updated_at: string;
  etag: string;
}

const serialize = (value: unknown) => Buffer.from(JSON.stringify(value));
const deserialize = (bytes: Buffer) => JSON.parse(bytes.toString("utf8")) as unknown;

function unary(name: string) {
  return {
    path: `/samework.Reads/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: serialize,
    requestDeserialize: deserialize,
    responseSerialize: serialize,
    responseDeserialize: deserialize,
    originalName: name,
  };
}

/** payment / document: R (the id); paymentRecord / documentRecord: R+ (the whole record). */
export const READS = {
  payment: unary("Payment"),
  paymentRecord: unary("PaymentRecord"),
  document: unary("Document"),
  documentRecord: unary("DocumentRecord"),
} satisfies ServiceDefinition;

export type ReadName = keyof typeof READS;

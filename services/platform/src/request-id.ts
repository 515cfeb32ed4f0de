// The request id: one per request at the edge — Envoy's x-request-id when it came through the
// trusted proxy, else a new one — returned on the response, passed to every hop in gRPC metadata and
// written on every log line of every hop.
import { randomUUID } from "node:crypto";

export const REQUEST_ID_HEADER = "x-request-id";

// What an id may look like (Envoy's are UUIDs): anything else is not taken into logs.
const ACCEPTABLE = /^[A-Za-z0-9._~:@+/=-]{1,128}$/;

/** The id a header or metadata value carries, when it is a well-formed one. */
export function acceptedRequestId(value: unknown): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return typeof v === "string" && ACCEPTABLE.test(v) ? v : undefined;
}

export function newRequestId(): string {
  return randomUUID();
}

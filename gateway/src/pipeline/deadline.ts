// Stage: deadline — how long a request's upstream call chain may take: GATEWAY_DEADLINE_MS, or what the
// client asks for (X-Request-Timeout-Ms on /v1; Connect-Timeout-Ms or grpc-timeout on /rpc), never
// more than GATEWAY_MAX_DEADLINE_MS. Past it the call ends (504 / deadline_exceeded).
import { edgeError } from "../runtime/errors.js";

/** The deadline in milliseconds for what the client asked (undefined: it asked for none). */
export type Deadline = (askedMs: number | undefined) => number;

export function deadlineStage(defaultMs: number, maxMs: number): Deadline {
  return function deadline(askedMs) {
    return askedMs === undefined ? defaultMs : Math.min(askedMs, maxMs);
  };
}

/** What /v1's X-Request-Timeout-Ms asks for: a whole number of milliseconds from 1 (else 400). */
export function askedTimeoutMs(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== "string" || !/^\d{1,9}$/.test(header) || Number(header) < 1) {
    throw edgeError("INVALID_REQUEST", "X-Request-Timeout-Ms must be a whole number of milliseconds from 1");
  }
  return Number(header);
}

// What a failed call to payments tells about the money: its gRPC status is the workflow's to read
// (the domain knows no transport).
import { Code, type ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform/errors.js";

// Refusals payments makes before anything commits (or in a transaction that rolled back).
const NOTHING_DONE = new Set<Code>([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unimplemented,
  Code.Unauthenticated,
  Code.ResourceExhausted,
]);

/**
 * Whether a failed call certainly moved no money. Everything else — a deadline, a dropped connection,
 * a crash inside payments — leaves the outcome unknown until payments is asked under the key.
 */
export function movedNoMoney(err: ConnectError): boolean {
  if (NOTHING_DONE.has(err.code)) return true;
  // Shed before the handler ran, or never sent (no replica of payments could be reached in time).
  const reason = err.code === Code.Unavailable ? errorInfoOf(err)?.reason : undefined;
  return reason === "LOAD_SHED" || reason === "UPSTREAM_UNREACHABLE";
}

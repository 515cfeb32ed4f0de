// Rules for the edge caches' change stream and leases, without I/O.
// (Only the gateway follows the stream and holds leases: content's call policy, rpc-handlers.ts.)
import { DomainError } from "@switchyard/platform/domain-error.js";

const SUBSCRIBER_ID = /^[A-Za-z0-9_-]{8,64}$/;

/** A renewal as asked: a subscriber id of the cache's choosing and a position from 0. */
export function cacheLeaseRenewal(req: { subscriberId: string; appliedPosition: bigint }): {
  subscriberId: string;
  appliedPosition: bigint;
} {
  if (!SUBSCRIBER_ID.test(req.subscriberId))
    throw new DomainError("INVALID_REQUEST", "subscriber_id must be 8 to 64 letters, digits, '_' or '-'");
  if (req.appliedPosition < 0n) throw new DomainError("INVALID_REQUEST", "applied_position must be from 0");
  return req;
}

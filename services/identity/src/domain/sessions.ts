// Rules for sessions, without I/O: a user reads and ends only their own.
import { DomainError } from "@switchyard/platform/domain-error.js";
import type { Caller } from "@switchyard/platform/caller.js";

/** The session, if it is the caller's own; another user's is as absent as a made-up one (404). */
export function ownSession<T extends { userId: bigint }>(caller: Caller, session: T | undefined): T {
  if (!session || session.userId !== caller.userId) throw new DomainError("NOT_FOUND", "session not found");
  return session;
}

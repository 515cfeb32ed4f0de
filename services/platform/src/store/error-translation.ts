// What a database failure means for the caller, the same for both engines: the few failures a
// caller can act on become the catalogue's reasons (a DomainError: the handler boundary makes it the
// call's status, as it does a rule's refusal); every other error passes through unchanged.
import { ConnectError } from "@connectrpc/connect";
import { DomainError } from "../domain-error.js";
import { reasonOf } from "../errors.js";

// Node's and pg's ways of saying the server cannot be reached or went away mid-query.
const CONNECTION_LOST =
  /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|server closed the connection/i;
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * PostgreSQL's "data exception" class (22xxx: a NUL character, a number or date out of range, text
 * that is no integer): a value from the request cannot be stored, 400. A statement or lock timeout
 * (57014, 55P03): the call's time ran out, 504. The server unreachable, gone, restarting (08xxx,
 * 57P01–57P03), or no connection free in time: 503.
 */
export function translateDatabaseError(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") {
    if (code.startsWith("22")) {
      return new DomainError(
        "INVALID_REQUEST",
        "a value in the request cannot be stored (e.g. a NUL character, or a number or date out of range)",
      );
    }
    if (code === "57014" || code === "55P03") {
      return new DomainError("DEADLINE_EXCEEDED", "the database work did not finish within the call's deadline");
    }
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") {
      return new DomainError("STORE_UNAVAILABLE", "the database is unavailable; retry after the Retry-After delay");
    }
  }
  const hasSqlState = typeof code === "string" && SQLSTATE.test(code);
  if (err instanceof Error && !hasSqlState && CONNECTION_LOST.test(err.message)) {
    return new DomainError("STORE_UNAVAILABLE", "the database is unavailable; retry after the Retry-After delay");
  }
  return err;
}

/**
 * Failures that come before a statement reached a server, so that nothing ran: no connection could be
 * made (refused, no such host), or the server refused a new one (57P03: starting up or shutting down;
 * 53300: too many connections). Trying once more is safe, whatever the statement was.
 */
export function refusedBeforeRunning(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return (
    code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "57P03" || code === "53300"
  );
}

/** The connection broke under the work (the driver's failure, or one already translated to STORE_UNAVAILABLE). */
export function isConnectionLoss(err: unknown): boolean {
  const refusal = err instanceof DomainError || err instanceof ConnectError ? err : translateDatabaseError(err);
  return reasonOf(refusal) === "STORE_UNAVAILABLE";
}

/** Runs `run`, rethrowing its failure translated. */
export async function translating<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw translateDatabaseError(err);
  }
}

/** `translating` for work that runs to its end synchronously. */
export function translatingSync<T>(run: () => T): T {
  try {
    return run();
  } catch (err) {
    throw translateDatabaseError(err);
  }
}

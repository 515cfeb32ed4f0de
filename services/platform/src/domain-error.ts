// A refusal, as the domain says it: one of the catalogue's reasons (error-catalogue.ts), a message for
// the caller and the details the reason carries — a plain error, no transport in it. Domain rules and
// stores throw it; the services' interceptor chain turns it into its gRPC status once, at the handler
// boundary (grpc/interceptors/domain-errors.ts), as the gateway turns a status into HTTP once.
import type { ErrorReason } from "./error-catalogue.js";

const NO_DETAILS: Readonly<Record<string, string>> = Object.freeze({});

export class DomainError extends Error {
  override readonly name = "DomainError";

  constructor(
    /** Why, from the catalogue: the caller's code reads it (ErrorInfo.reason), and it picks the status. */
    readonly reason: ErrorReason,
    message: string,
    /** What the reason carries (ErrorInfo.metadata): the field at fault, the current price, … */
    readonly details: Readonly<Record<string, string>> = NO_DETAILS,
  ) {
    super(message);
  }
}

// The error catalogue as the transport speaks it. Domain rules and stores throw a DomainError with a
// reason of the catalogue (error-catalogue.ts; domain-error.ts: no transport in it), which the services'
// interceptor chain turns into its status once (statusErrorOf); code that speaks gRPC itself (the
// adapter, authentication, a call's outcome) throws `fail(...)`. The gateway maps each reason to its
// HTTP status in its own table (gateway/src/runtime/errors.ts), so HTTP stays at the edge.
import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorInfoSchema, type ErrorInfo } from "@switchyard/gen/google/rpc/error_details_pb.js";
import { errorCatalogue, type ErrorReason } from "./error-catalogue.js";
import { DomainError } from "./domain-error.js";

export { errorCatalogue, isErrorReason, type ErrorReason } from "./error-catalogue.js";

export const ERROR_DOMAIN = "switchyard";

/** Builds the ConnectError for a catalogued reason, carrying an ErrorInfo detail. */
export function fail(reason: ErrorReason, message: string, metadata: Record<string, string> = {}): ConnectError {
  const info = create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata });
  return new ConnectError(message, errorCatalogue[reason].code, undefined, [{ desc: ErrorInfoSchema, value: info }]);
}

/** A domain rule's refusal as its gRPC status error (the catalogue's code, ErrorInfo); any other error as it is. */
export function statusErrorOf(err: unknown): unknown {
  return err instanceof DomainError ? fail(err.reason, err.message, { ...err.details }) : err;
}

/** The ErrorInfo of an error, whether raised here or decoded from a peer's status details. */
export function errorInfoOf(err: ConnectError): ErrorInfo | undefined {
  return err.findDetails(ErrorInfoSchema)[0];
}

/**
 * The catalogue's reason of a failure in either form: a DomainError raised in this process (a rule's,
 * a store's) or a status error (fail(), a peer's status); undefined for any other error.
 */
export function reasonOf(err: unknown): string | undefined {
  if (err instanceof DomainError) return err.reason;
  return err instanceof ConnectError ? errorInfoOf(err)?.reason : undefined;
}

// The error catalogue: every failure a service raises has a stable reason (google.rpc.ErrorInfo),
// a gRPC code, and the HTTP status the public edge answers with. Services throw `fail(...)`;
// the gateway reads the same table, so a reason means one thing everywhere.
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorInfoSchema, type ErrorInfo } from "@switchyard/gen/google/rpc/error_details_pb.js";

export const ERROR_DOMAIN = "switchyard";

interface CatalogueEntry {
  readonly code: Code;
  readonly http: number;
  /**
   * ErrorInfo metadata keys a client may see, with their JSON type: the edge puts them in the error
   * body's `details`. Everything else in the metadata stays inside the mesh.
   */
  readonly details?: Readonly<Record<string, "string" | "integer">>;
}

export const errorCatalogue = {
  // 400: the request itself is malformed.
  INVALID_REQUEST: { code: Code.InvalidArgument, http: 400 },
  INVALID_CURSOR: { code: Code.InvalidArgument, http: 400 },
  IDEMPOTENCY_KEY_INVALID: { code: Code.InvalidArgument, http: 400 },
  // 422: well-formed values that break a rule.
  RULE_VIOLATION: { code: Code.InvalidArgument, http: 422 },
  IDEMPOTENCY_KEY_REUSED: { code: Code.InvalidArgument, http: 422 },
  REFUND_EXCEEDS_REFUNDABLE: { code: Code.InvalidArgument, http: 422 },
  UNKNOWN_SKU: { code: Code.InvalidArgument, http: 422, details: { sku: "string" } },
  CURRENCY_MISMATCH: { code: Code.InvalidArgument, http: 422, details: { sku: "string", currency: "string" } },
  // 401 / 403.
  UNAUTHENTICATED: { code: Code.Unauthenticated, http: 401 },
  INVALID_CREDENTIALS: { code: Code.Unauthenticated, http: 401 },
  TENANT_MISMATCH: { code: Code.PermissionDenied, http: 403 },
  ROLE_REQUIRED: { code: Code.PermissionDenied, http: 403 },
  // The edge's own refusals (the gateway raises these before any service is called).
  PAYLOAD_TOO_LARGE: { code: Code.InvalidArgument, http: 413 },
  UNSUPPORTED_MEDIA_TYPE: { code: Code.InvalidArgument, http: 415 },
  ROUTE_NOT_FOUND: { code: Code.NotFound, http: 404 },
  METHOD_NOT_ALLOWED: { code: Code.Unimplemented, http: 405 },
  // 404 / 409 / 412.
  NOT_FOUND: { code: Code.NotFound, http: 404 },
  ALREADY_EXISTS: { code: Code.AlreadyExists, http: 409 },
  IDEMPOTENCY_KEY_IN_FLIGHT: { code: Code.Aborted, http: 409 },
  INVALID_STATE: { code: Code.FailedPrecondition, http: 409 },
  /** A live feed asked to resume further back than it replays. */
  REPLAY_TOO_LONG: { code: Code.FailedPrecondition, http: 409 },
  /** A money step of the order (a charge or a refund) has started and is not settled yet. */
  STEP_IN_PROGRESS: { code: Code.FailedPrecondition, http: 409, details: { step: "string" } },
  /** The catalog price is not the one the client expected: the current price is in the details. */
  PRICE_CHANGED: { code: Code.FailedPrecondition, http: 409, details: { sku: "string", unit_price: "integer", currency: "string" } },
  NOTHING_TO_REFUND: { code: Code.FailedPrecondition, http: 409 },
  /** The key was settled as never used (ResolveIdempotencyKey): nothing will ever be made with it. */
  IDEMPOTENCY_KEY_VOIDED: { code: Code.FailedPrecondition, http: 409 },
  ETAG_MISMATCH: { code: Code.FailedPrecondition, http: 412 },
  // 429.
  RATE_LIMITED: { code: Code.ResourceExhausted, http: 429 },
  /** A live stream's reader fell too far behind and the stream was ended. */
  STREAM_READER_TOO_SLOW: { code: Code.ResourceExhausted, http: 429 },
  /** The caller holds as many live streams as one may. */
  TOO_MANY_STREAMS: { code: Code.ResourceExhausted, http: 429 },
  /** Too many failed logins for the account or the address: metadata retry_after_seconds says how long to wait. */
  LOGIN_THROTTLED: { code: Code.ResourceExhausted, http: 429 },
  // 5xx.
  LOAD_SHED: { code: Code.Unavailable, http: 503 },
  /** The service's database cannot be reached, or no connection to it came free in time. */
  STORE_UNAVAILABLE: { code: Code.Unavailable, http: 503 },
  UPSTREAM_UNAVAILABLE: { code: Code.Unavailable, http: 502 },
  /** The process is draining before it exits (readiness says so, so no new work is sent to it). */
  SHUTTING_DOWN: { code: Code.Unavailable, http: 503 },
  DEADLINE_EXCEEDED: { code: Code.DeadlineExceeded, http: 504 },
  INTERNAL: { code: Code.Internal, http: 500 },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorReason = keyof typeof errorCatalogue;

export function isErrorReason(reason: string): reason is ErrorReason {
  return Object.hasOwn(errorCatalogue, reason);
}

/** Builds the ConnectError for a catalogued reason, carrying an ErrorInfo detail. */
export function fail(reason: ErrorReason, message: string, metadata: Record<string, string> = {}): ConnectError {
  const info = create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata });
  return new ConnectError(message, errorCatalogue[reason].code, undefined, [{ desc: ErrorInfoSchema, value: info }]);
}

/** The ErrorInfo of an error, whether raised here or decoded from a peer's status details. */
export function errorInfoOf(err: ConnectError): ErrorInfo | undefined {
  return err.findDetails(ErrorInfoSchema)[0];
}

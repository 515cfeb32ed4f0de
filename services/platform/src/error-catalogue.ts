// The error catalogue: every failure a service raises has a stable reason (google.rpc.ErrorInfo) and
// a gRPC code. A module of its own, importing neither side of it: a DomainError (domain-error.ts) names
// a reason, the transport (errors.ts) turns it into its status; the gateway maps each reason to its
// HTTP status in its own table (gateway/src/runtime/errors.ts), so a reason means one thing everywhere.
import { Code } from "@connectrpc/connect";

interface CatalogueEntry {
  readonly code: Code;
  /**
   * ErrorInfo metadata keys a client may see, with their JSON type: the edge puts them in the error
   * body's `details`. Everything else in the metadata stays inside the mesh.
   */
  readonly details?: Readonly<Record<string, "string" | "integer">>;
}

export const errorCatalogue = {
  // The request itself is malformed.
  INVALID_REQUEST: { code: Code.InvalidArgument },
  INVALID_CURSOR: { code: Code.InvalidArgument },
  IDEMPOTENCY_KEY_INVALID: { code: Code.InvalidArgument },
  // Well-formed values that break a rule.
  RULE_VIOLATION: { code: Code.InvalidArgument },
  IDEMPOTENCY_KEY_REUSED: { code: Code.InvalidArgument },
  REFUND_EXCEEDS_REFUNDABLE: { code: Code.InvalidArgument },
  UNKNOWN_SKU: { code: Code.InvalidArgument, details: { sku: "string" } },
  CURRENCY_MISMATCH: { code: Code.InvalidArgument, details: { sku: "string", currency: "string" } },
  // Who is calling, and whether they may.
  UNAUTHENTICATED: { code: Code.Unauthenticated },
  INVALID_CREDENTIALS: { code: Code.Unauthenticated },
  TENANT_MISMATCH: { code: Code.PermissionDenied },
  ROLE_REQUIRED: { code: Code.PermissionDenied },
  // The edge's own refusals (the gateway raises these before any service is called).
  PAYLOAD_TOO_LARGE: { code: Code.InvalidArgument },
  UNSUPPORTED_MEDIA_TYPE: { code: Code.InvalidArgument },
  ROUTE_NOT_FOUND: { code: Code.NotFound },
  METHOD_NOT_ALLOWED: { code: Code.Unimplemented },
  /** The media type asks for a version that is not published (details: the published media types). */
  NOT_ACCEPTABLE: { code: Code.InvalidArgument, details: { published: "string" } },
  // What the request is about: missing, taken, in the wrong state, or changed meanwhile.
  NOT_FOUND: { code: Code.NotFound },
  ALREADY_EXISTS: { code: Code.AlreadyExists },
  IDEMPOTENCY_KEY_IN_FLIGHT: { code: Code.Aborted },
  INVALID_STATE: { code: Code.FailedPrecondition },
  /** A live feed asked to resume further back than it replays. */
  REPLAY_TOO_LONG: { code: Code.FailedPrecondition },
  /** A money step of the order (a charge or a refund) has started and is not settled yet. */
  STEP_IN_PROGRESS: { code: Code.FailedPrecondition, details: { step: "string" } },
  /** The catalog price is not the one the client expected: the current price is in the details. */
  PRICE_CHANGED: {
    code: Code.FailedPrecondition,
    details: { sku: "string", unit_price: "integer", currency: "string" },
  },
  NOTHING_TO_REFUND: { code: Code.FailedPrecondition },
  /** The key was settled as never used (ResolveIdempotencyKey): nothing will ever be made with it. */
  IDEMPOTENCY_KEY_VOIDED: { code: Code.FailedPrecondition },
  ETAG_MISMATCH: { code: Code.FailedPrecondition },
  // Too much, too fast.
  RATE_LIMITED: { code: Code.ResourceExhausted },
  /** A live stream's reader fell too far behind and the stream was ended. */
  STREAM_READER_TOO_SLOW: { code: Code.ResourceExhausted },
  /** The caller holds as many live streams as one may. */
  TOO_MANY_STREAMS: { code: Code.ResourceExhausted },
  /** Too many failed logins for the account or the address: metadata retry_after_seconds says how long to wait. */
  LOGIN_THROTTLED: { code: Code.ResourceExhausted },
  // The mesh cannot do it now.
  LOAD_SHED: { code: Code.Unavailable },
  /** The service's database cannot be reached, or no connection to it came free in time. */
  STORE_UNAVAILABLE: { code: Code.Unavailable },
  /** The call broke after it was sent (its outcome unknown), or the answer could not be used. */
  UPSTREAM_UNAVAILABLE: { code: Code.Unavailable },
  /** No replica of the service could be reached within the call's deadline: the call was never sent. */
  UPSTREAM_UNREACHABLE: { code: Code.Unavailable },
  DEADLINE_EXCEEDED: { code: Code.DeadlineExceeded },
  INTERNAL: { code: Code.Internal },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorReason = keyof typeof errorCatalogue;

export function isErrorReason(reason: string): reason is ErrorReason {
  return Object.hasOwn(errorCatalogue, reason);
}

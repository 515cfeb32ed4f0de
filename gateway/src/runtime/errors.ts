// One place maps failures to HTTP: the status of a known reason (the table below; the services'
// catalogue knows gRPC codes and reasons only), else the gRPC code's status (the grpc-gateway table). The body is always {"error", "code"}, plus `details` for
// the few reasons whose catalogue entry names facts a client needs (e.g. PRICE_CHANGED's price).
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCatalogue, errorInfoOf, isErrorReason, type ErrorReason } from "@switchyard/platform/errors.js";

/** A failure as the client sees it. No stack trace: it is an answer, not a bug, and capturing one costs on every refusal. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly details?: Record<string, string | number>,
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }

  #body: string | undefined;
  /** The JSON body, serialized once: a refusal made often (a shed, a quota) is answered from it each time. */
  get body(): string {
    return (this.#body ??= JSON.stringify(this.details ? { error: this.message, code: this.code, details: this.details } : { error: this.message, code: this.code }));
  }
}

/** The HTTP status of every catalogued reason (a reason added to the catalogue does not compile until it has one). */
export const HTTP_STATUS: Readonly<Record<ErrorReason, number>> = {
  INVALID_REQUEST: 400, INVALID_CURSOR: 400, IDEMPOTENCY_KEY_INVALID: 400,
  UNAUTHENTICATED: 401, INVALID_CREDENTIALS: 401,
  TENANT_MISMATCH: 403, ROLE_REQUIRED: 403,
  ROUTE_NOT_FOUND: 404, NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  ALREADY_EXISTS: 409, IDEMPOTENCY_KEY_IN_FLIGHT: 409, INVALID_STATE: 409, REPLAY_TOO_LONG: 409, STEP_IN_PROGRESS: 409, PRICE_CHANGED: 409, NOTHING_TO_REFUND: 409, IDEMPOTENCY_KEY_VOIDED: 409,
  ETAG_MISMATCH: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RULE_VIOLATION: 422, IDEMPOTENCY_KEY_REUSED: 422, REFUND_EXCEEDS_REFUNDABLE: 422, UNKNOWN_SKU: 422, CURRENCY_MISMATCH: 422,
  RATE_LIMITED: 429, STREAM_READER_TOO_SLOW: 429, TOO_MANY_STREAMS: 429, LOGIN_THROTTLED: 429,
  INTERNAL: 500,
  UPSTREAM_UNAVAILABLE: 502,
  LOAD_SHED: 503, STORE_UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

/** An error the gateway raises itself, by catalogue reason. */
export function edgeError(reason: ErrorReason, message: string, headers?: Record<string, string>): HttpError {
  return new HttpError(HTTP_STATUS[reason], reason, message, headers);
}

const STATUS_BY_CODE: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 502,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 409,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 502,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

// Codes for failures that arrive without a catalogued reason.
const REASON_BY_CODE: Partial<Record<Code, ErrorReason>> = {
  [Code.Unavailable]: "UPSTREAM_UNAVAILABLE",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.Internal]: "INTERNAL",
  [Code.Unknown]: "UPSTREAM_UNAVAILABLE",
  [Code.DataLoss]: "INTERNAL",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
  [Code.PermissionDenied]: "ROLE_REQUIRED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.InvalidArgument]: "INVALID_REQUEST",
};

/** Retry-After (seconds) on statuses the client should come back to later. */
const RETRY_AFTER: Record<number, string> = { 503: "1", 429: "1" };

/** Maps anything a handler threw to the HTTP error the client sees. */
export function toHttpError(err: unknown, upstream = "upstream"): HttpError {
  if (err instanceof HttpError) return err;
  if (!(err instanceof ConnectError)) return edgeError("INTERNAL", "internal error");
  const reason = errorInfoOf(err)?.reason;
  if (reason && isErrorReason(reason)) {
    const status = HTTP_STATUS[reason];
    return new HttpError(status, reason, status >= 500 ? messageFor5xx(status, upstream) : err.rawMessage, retryAfter(status, errorInfoOf(err)?.metadata.retry_after_seconds), publicDetails(reason, err));
  }
  const status = STATUS_BY_CODE[err.code] ?? 500;
  const code = REASON_BY_CODE[err.code] ?? "INTERNAL";
  return new HttpError(status, code, status >= 500 ? messageFor5xx(status, upstream) : err.rawMessage, retryAfter(status));
}

/** The metadata the catalogue lets out, typed as it says; undefined when there is none. */
function publicDetails(reason: ErrorReason, err: ConnectError): Record<string, string | number> | undefined {
  const declared: Readonly<Record<string, "string" | "integer">> | undefined = (errorCatalogue[reason] as { details?: Readonly<Record<string, "string" | "integer">> }).details;
  if (!declared) return undefined;
  const metadata = errorInfoOf(err)?.metadata ?? {};
  const details: Record<string, string | number> = {};
  for (const [key, type] of Object.entries(declared)) {
    const value = metadata[key];
    if (value === undefined) continue;
    if (type === "string") details[key] = value;
    else if (/^-?\d{1,15}$/.test(value)) details[key] = Number(value);
  }
  return Object.keys(details).length > 0 ? details : undefined;
}

/** Retry-After: the service's own figure (ErrorInfo retry_after_seconds), else the status's default. */
function retryAfter(status: number, stated?: string): Record<string, string> {
  if (stated !== undefined && /^\d{1,6}$/.test(stated) && (status === 429 || status === 503)) return { "retry-after": stated };
  const seconds = RETRY_AFTER[status];
  return seconds ? { "retry-after": seconds } : {};
}

// 5xx messages never echo upstream internals.
function messageFor5xx(status: number, upstream: string): string {
  switch (status) {
    case 502:
      return `the ${upstream} service is unavailable`;
    case 503:
      return `the ${upstream} service is shedding load; retry after the Retry-After delay`;
    case 504:
      return `the ${upstream} service did not answer in time; the operation may have completed`;
    default:
      return "internal error";
  }
}

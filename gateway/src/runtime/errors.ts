// One place maps failures to what a client is told, on /v1 (HTTP) and /rpc (gRPC codes) alike: the
// status of a known reason (the table below; the services' catalogue knows gRPC codes and reasons
// only), else — a failure of the transport, never of the request — a 5xx. The body is always
// {"error", "code"}, plus `details` for the few reasons whose catalogue entry names facts a client
// needs (e.g. PRICE_CHANGED's price). 5xx messages are the gateway's own, never an upstream's text.
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCatalogue, errorInfoOf, fail, isErrorReason, type ErrorReason } from "@switchyard/platform/errors.js";

/** What a failure adds to its status, code and message: headers to answer with (Retry-After), its reason's public facts. */
export interface HttpErrorExtras {
  headers?: Record<string, string>;
  details?: Record<string, string | number> | undefined;
}

/** A failure as the client sees it. No stack trace: it is an answer, not a bug, and capturing one costs on every refusal. */
export class HttpError extends Error {
  readonly headers: Record<string, string>;
  readonly details: Record<string, string | number> | undefined;

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    extras: HttpErrorExtras = {},
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.headers = extras.headers ?? {};
    this.details = extras.details;
  }

  #body: string | undefined;
  /** The JSON body, serialized once: a refusal made often (a shed, a quota) is answered from it each time. */
  get body(): string {
    return (this.#body ??= JSON.stringify(
      this.details
        ? { error: this.message, code: this.code, details: this.details }
        : { error: this.message, code: this.code },
    ));
  }
}

/** The HTTP status of every catalogued reason (a reason added to the catalogue does not compile until it has one). */
export const HTTP_STATUS: Readonly<Record<ErrorReason, number>> = {
  INVALID_REQUEST: 400,
  INVALID_CURSOR: 400,
  IDEMPOTENCY_KEY_INVALID: 400,
  UNAUTHENTICATED: 401,
  INVALID_CREDENTIALS: 401,
  TENANT_MISMATCH: 403,
  ROLE_REQUIRED: 403,
  ROUTE_NOT_FOUND: 404,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  ALREADY_EXISTS: 409,
  IDEMPOTENCY_KEY_IN_FLIGHT: 409,
  INVALID_STATE: 409,
  REPLAY_TOO_LONG: 409,
  STEP_IN_PROGRESS: 409,
  PRICE_CHANGED: 409,
  NOTHING_TO_REFUND: 409,
  IDEMPOTENCY_KEY_VOIDED: 409,
  ETAG_MISMATCH: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RULE_VIOLATION: 422,
  IDEMPOTENCY_KEY_REUSED: 422,
  REFUND_EXCEEDS_REFUNDABLE: 422,
  UNKNOWN_SKU: 422,
  CURRENCY_MISMATCH: 422,
  RATE_LIMITED: 429,
  STREAM_READER_TOO_SLOW: 429,
  TOO_MANY_STREAMS: 429,
  LOGIN_THROTTLED: 429,
  INTERNAL: 500,
  UPSTREAM_UNAVAILABLE: 502,
  LOAD_SHED: 503,
  STORE_UNAVAILABLE: 503,
  UPSTREAM_UNREACHABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

/** An error the gateway raises itself, by catalogue reason. */
export function edgeError(reason: ErrorReason, message: string, headers?: Record<string, string>): HttpError {
  return new HttpError(HTTP_STATUS[reason], reason, message, { headers });
}

/**
 * A failure without a catalogued reason did not come from a service's rules — every refusal there is
 * raised by reason (`fail`) — but from the transport or the channel: grpc-js's own deadline, a peer
 * unreachable or gone, an answer past the receive limit, a reset stream, a handler's bug. It is
 * never the client's fault, so never a 4xx (least of all 429: a limit of the channel is not the
 * client's quota), and its text is the library's (addresses, ports, sizes), so it is never shown.
 */
function transportReason(code: Code): ErrorReason {
  switch (code) {
    case Code.DeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case Code.Internal:
    case Code.DataLoss:
      return "INTERNAL";
    default:
      // Unavailable, and everything else an upstream answered unusably (RESOURCE_EXHAUSTED past the receive limit, …).
      return "UPSTREAM_UNAVAILABLE";
  }
}

/** Status of a client that went away: the call was cancelled because its request was (logged, never read). */
const CLIENT_CLOSED = 499;

/** Retry-After (seconds) on statuses the client should come back to later. */
const RETRY_AFTER: Record<number, string> = { 503: "1", 429: "1" };

/** What a client is told of a failure, on /v1 and /rpc alike. */
interface PublicFailure {
  status: number;
  reason: ErrorReason;
  message: string;
  headers: Record<string, string>;
  details?: Record<string, string | number> | undefined;
}

function publicFailure(err: ConnectError, upstream: string): PublicFailure {
  const info = errorInfoOf(err);
  if (info && isErrorReason(info.reason)) {
    const status = HTTP_STATUS[info.reason];
    // A refusal of the request says why in the service's words; a failure of the mesh in the gateway's.
    const message = status >= 500 ? messageFor5xx(status, upstream, err.code, info.reason) : err.rawMessage;
    return {
      status,
      reason: info.reason,
      message,
      headers: retryAfter(status, info.metadata.retry_after_seconds),
      details: publicDetails(info.reason, err),
    };
  }
  if (err.code === Code.Canceled)
    return { status: CLIENT_CLOSED, reason: "INTERNAL", message: "the request was cancelled", headers: {} };
  const reason = transportReason(err.code);
  const status = HTTP_STATUS[reason];
  return { status, reason, message: messageFor5xx(status, upstream, err.code), headers: retryAfter(status) };
}

/** Maps anything a handler threw to the HTTP error the client sees. */
export function toHttpError(err: unknown, upstream = "upstream"): HttpError {
  if (err instanceof HttpError) return err;
  if (!(err instanceof ConnectError)) return edgeError("INTERNAL", "internal error");
  const failure = publicFailure(err, upstream);
  return new HttpError(failure.status, failure.reason, failure.message, failure);
}

/**
 * The same mapping for the browser proxy, in gRPC terms: a refusal of the request with a catalogued
 * reason goes to the page as the service raised it (message, ErrorInfo, details); anything else
 * becomes the catalogue's code for its reason, with the message /v1 gives (and its Retry-After).
 */
export function toRpcError(err: unknown, upstream: string): ConnectError {
  const error = err instanceof ConnectError ? err : ConnectError.from(err, Code.Internal);
  const failure = publicFailure(error, upstream);
  if (failure.status < 500 && errorInfoOf(error) !== undefined) return error;
  if (failure.status === CLIENT_CLOSED) return new ConnectError(failure.message, Code.Canceled);
  const clean = fail(failure.reason, failure.message);
  for (const [name, value] of Object.entries(failure.headers)) clean.metadata.set(name, value);
  return clean;
}

/** The metadata the catalogue lets out, typed as it says; undefined when there is none. */
function publicDetails(reason: ErrorReason, err: ConnectError): Record<string, string | number> | undefined {
  const declared: Readonly<Record<string, "string" | "integer">> | undefined = (
    errorCatalogue[reason] as { details?: Readonly<Record<string, "string" | "integer">> }
  ).details;
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
  if (stated !== undefined && /^\d{1,6}$/.test(stated) && (status === 429 || status === 503))
    return { "retry-after": stated };
  const seconds = RETRY_AFTER[status];
  return seconds ? { "retry-after": seconds } : {};
}

// 5xx messages never echo upstream internals; they say which part of the mesh could not do it.
function messageFor5xx(status: number, upstream: string, code: Code, reason?: ErrorReason): string {
  if (reason === "STORE_UNAVAILABLE")
    return `the ${upstream} service's database is unavailable; retry after the Retry-After delay`;
  if (reason === "UPSTREAM_UNREACHABLE")
    return `the ${upstream} service, or a service it needs, could not be reached within the deadline; retry after the Retry-After delay`;
  switch (status) {
    case 502:
      // Not unreachable but an answer the channel refused (past its receive limit, a reset stream, …).
      return code === Code.Unavailable
        ? `the ${upstream} service is unavailable`
        : `the ${upstream} service gave an answer that could not be used`;
    case 503:
      return `the ${upstream} service is shedding load; retry after the Retry-After delay`;
    case 504:
      return `the ${upstream} service did not answer in time; the operation may have completed`;
    default:
      return "internal error";
  }
}

// A Connect HandlerContext built over a grpc-js server call. Headers are built lazily: most
// handlers read one metadata key, and building a Headers object per call is measurable. Beside it, what
// the interceptors read of a call (interceptors/): its deadline, request id, peer, and how it ended.
import type { PeerCertificate } from "node:tls";
import type { Metadata } from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type HandlerContext } from "@connectrpc/connect";
import type { CallScope } from "../call-deadline.js";
import { fail } from "../errors.js";
import { acceptedRequestId, newRequestId, REQUEST_ID_HEADER } from "../request-id.js";
import { PRIORITY_HEADER, priorityFrom, type Priority } from "../priority.js";
import { answersOnce, deadlineWithin, type DeadlineLimits } from "./deadline-policy.js";

export interface ServerCallLike {
  metadata: Metadata;
  /** The TLS peer certificate, on a connection with one (grpc-js). */
  getAuthContext?(): { sslPeerCertificate?: PeerCertificate | undefined };
  /** grpc-js sets it once the client cancelled the call (or its stream closed). */
  cancelled?: boolean;
  getPeer?(): string;
  getDeadline(): Date | number;
  getPath(): string;
  on(event: "cancelled", listener: () => void): unknown;
  removeListener(event: "cancelled", listener: () => void): unknown;
}

/** A call's context as the adapter holds it while the call runs. */
export interface OpenCall extends HandlerContext {
  /** The call is over: aborts the signal (so lingering downstream calls stop) and clears timers. */
  done(): void;
}

function metadataToHeaders(metadata: Metadata): Headers {
  const headers = new Headers();
  for (const [key, values] of Object.entries(metadata.getMap())) {
    if (typeof values === "string") headers.append(key, values);
  }
  return headers;
}

// The signal of every finished call is aborted with this one reason: `abort()` without a reason
// builds a DOMException with a stack trace on every call, which the hot path can do without.
const CALL_FINISHED = new ConnectError("call finished", Code.Canceled);

/**
 * A call's abort signal, made the first time something asks for it. Most unary handlers never do
 * (a read that only awaits its store), and the controller, the deadline timer and the listener for
 * the client's cancel are a measurable part of such a call (issue 12). Once made, the signal is what
 * it would have been from the start: already aborted if the call was cancelled, past its deadline or
 * finished, else aborted when that happens.
 */
class CallAbort {
  private controller: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private onCancelled: (() => void) | undefined;
  private finished = false;
  /** The deadline's timer fired (it may fire a moment before Date.now() reaches the deadline). */
  deadlineReached = false;

  constructor(
    private readonly call: ServerCallLike,
    /** ms since the epoch; not finite: no deadline. */
    private readonly deadline: number,
  ) {}

  get signal(): AbortSignal {
    if (this.controller) return this.controller.signal;
    const controller = (this.controller = new AbortController());
    if (this.finished) controller.abort(CALL_FINISHED);
    else if (this.call.cancelled) controller.abort(cancelledByClient());
    else if (Number.isFinite(this.deadline) && this.deadline <= Date.now()) controller.abort(deadlineExceeded());
    else {
      if (Number.isFinite(this.deadline)) {
        this.timer = setTimeout(() => {
          this.deadlineReached = true;
          controller.abort(deadlineExceeded());
        }, this.deadline - Date.now());
      }
      this.onCancelled = () => controller.abort(cancelledByClient());
      this.call.on("cancelled", this.onCancelled);
    }
    return controller.signal;
  }

  /** Ends the call's signal with `reason` (the caller checked it had not ended). */
  abort(reason: Error): void {
    // The signal is made first when nothing asked for it yet: later readers see it ended with this reason.
    void this.signal;
    this.controller!.abort(reason);
  }

  /** The call is over: a signal handed out is aborted (so lingering downstream calls stop), timers cleared. */
  done(): void {
    this.finished = true;
    if (!this.controller) return;
    if (this.timer) clearTimeout(this.timer);
    if (this.onCancelled) this.call.removeListener("cancelled", this.onCancelled);
    if (!this.controller.signal.aborted) this.controller.abort(CALL_FINISHED);
  }
}

const cancelledByClient = () => new ConnectError("call cancelled by the client", Code.Canceled);
export const deadlineExceeded = () => fail("DEADLINE_EXCEEDED", "deadline exceeded");

/**
 * A call's HandlerContext: a class, so that its getters are shared on the prototype. A literal with
 * getters made per call (closures over the call) gave every context a map of its own, kept in old
 * space until a full GC with the closures — and the whole grpc-js call — attached, so every call's
 * objects survived young-generation GC (issue 15). What the adapter needs beside the context (the
 * metadata, the abort, the peer, why the server ended it) is kept here too, not in WeakMaps keyed by
 * the context: a young-generation GC keeps a WeakMap's values alive whatever their keys.
 */
class CallContext implements HandlerContext {
  readonly requestMethod = "POST";
  readonly protocolName = "grpc";
  readonly url: string;
  /** Why the server ended the call early (endCall), if it did. */
  endedBy: Error | undefined;
  #requestHeader: Headers | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;
  #values: ReturnType<typeof createContextValues> | undefined;
  #requestId: string | undefined;

  /** ms since the epoch; not finite: no deadline. */
  readonly deadline: number;
  readonly abort: CallAbort;

  /** Whether the deadline is the server's own, earlier than the caller's (see DeadlineLimits). */
  readonly serverSetDeadline: boolean;

  constructor(
    readonly call: ServerCallLike,
    readonly service: DescService,
    readonly method: DescMethod,
    limits?: DeadlineLimits,
  ) {
    const rawDeadline = call.getDeadline();
    const asked = rawDeadline instanceof Date ? rawDeadline.getTime() : rawDeadline;
    this.deadline = limits && answersOnce(method) ? deadlineWithin(asked, limits, Date.now()) : asked;
    this.serverSetDeadline = this.deadline < asked;
    this.abort = new CallAbort(call, this.deadline);
    this.url = call.getPath();
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  // A property holding a function, as Connect declares it: bound once here, not per call site.
  readonly timeoutMs = (): number | undefined =>
    Number.isFinite(this.deadline) ? this.deadline - Date.now() : undefined;

  get requestHeader(): Headers {
    return (this.#requestHeader ??= metadataToHeaders(this.call.metadata));
  }

  get responseHeader(): Headers {
    return (this.#responseHeader ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.#responseTrailer ??= new Headers());
  }

  get values(): ReturnType<typeof createContextValues> {
    return (this.#values ??= createContextValues());
  }

  /** The call's priority as its caller sent it (the gateway's route, or the call it was made within); `default` if none. */
  get priority(): Priority {
    return priorityFrom(this.call.metadata.get(PRIORITY_HEADER)[0]);
  }

  /** The call's request id: the caller's (a well-formed one), else a new one. */
  get requestId(): string {
    return (this.#requestId ??= acceptedRequestId(this.call.metadata.get(REQUEST_ID_HEADER)[0]) ?? newRequestId());
  }

  done(): void {
    this.abort.done();
  }
}

/** The context of a call the server begins: its deadline within `limits` (a call that answers once). */
export function openCallContext(
  call: ServerCallLike,
  service: DescService,
  method: DescMethod,
  limits?: DeadlineLimits,
): OpenCall {
  return new CallContext(call, service, method, limits);
}

/** The context as this module made it (a context made elsewhere — a test's — has none of its state). */
const ownContext = (context: HandlerContext): CallContext | undefined =>
  context instanceof CallContext ? context : undefined;

/**
 * Ends a call from the server's side with `reason` (its credential expired or was revoked): the
 * handler sees its signal abort, and a stream ends with that status instead of OK.
 */
export function endCall(context: HandlerContext, reason: Error): void {
  const own = ownContext(context);
  if (!own || own.abort.signal.aborted) return;
  own.endedBy = reason;
  own.abort.abort(reason);
}

/** The call's deadline (ms since the epoch), the server's own when it set one; undefined: none. */
export function deadlineOf(context: HandlerContext): number | undefined {
  const own = ownContext(context);
  if (own) return Number.isFinite(own.deadline) ? own.deadline : undefined;
  const remaining = context.timeoutMs();
  return remaining === undefined ? undefined : Date.now() + remaining;
}

/**
 * The deadline (ms since the epoch) the server set, earlier than the caller's (none sent, or past the
 * ceiling): grpc-js enforces only the caller's, so the chain enforces this one. Undefined: none.
 */
export function serverDeadlineOf(context: HandlerContext): number | undefined {
  const own = ownContext(context);
  return own?.serverSetDeadline ? own.deadline : undefined;
}

/** The call's request id: the caller's (a well-formed one), else one made for it. */
export function requestIdOf(context: HandlerContext): string {
  return ownContext(context)?.requestId ?? newRequestId();
}

/** The call's priority (`default` when its caller sent none). */
export function priorityOf(context: HandlerContext): Priority {
  return ownContext(context)?.priority ?? priorityFrom(context.requestHeader.get(PRIORITY_HEADER));
}

/** The call's deadline, request id and priority: what the work done for it is bounded by and passes on (call-deadline.ts). */
export function callScopeOf(context: HandlerContext): CallScope {
  return { deadlineAt: deadlineOf(context), requestId: requestIdOf(context), priority: priorityOf(context) };
}

/** Why the server ended the call early (endCall), if it did. */
export function endedBy(context: HandlerContext): Error | undefined {
  return ownContext(context)?.endedBy;
}

/**
 * Why a call that is ending did not end well though its handler returned: its deadline has passed (a
 * stream whose handler stopped because its signal said so was cut, not finished). Undefined otherwise.
 */
export function cutByDeadline(context: HandlerContext): Error | undefined {
  const own = ownContext(context);
  return own && Number.isFinite(own.deadline) && (own.abort.deadlineReached || Date.now() >= own.deadline)
    ? deadlineExceeded()
    : undefined;
}

/** The header the gateway puts the client's address in (the one its trusted proxies saw). */
export const CLIENT_ADDRESS_HEADER = "x-client-address";

/**
 * The host of the call's own peer, without its port (a client opening new connections must not
 * count as a new address each time); undefined for a context made elsewhere.
 */
export function peerHostOf(context: HandlerContext): string | undefined {
  const peer = ownContext(context)?.call.getPeer?.();
  if (peer === undefined) return undefined;
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(peer);
  if (bracketed) return bracketed[1];
  const hostAndPort = /^([^:]+):\d+$/.exec(peer);
  return hostAndPort ? hostAndPort[1] : peer;
}

/** The certificate the call's peer presented (mutual TLS), undefined without one. */
export function peerCertificateOf(context: HandlerContext): PeerCertificate | undefined {
  return ownContext(context)?.call.getAuthContext?.().sslPeerCertificate;
}

/** The call's request metadata as grpc-js received it; undefined for a context made elsewhere. */
export function metadataOf(context: HandlerContext): Metadata | undefined {
  return ownContext(context)?.call.metadata;
}

/** Reads one request metadata value without building Headers (the hot path: the bearer token). */
export function requestMetadataValue(context: HandlerContext, key: string): string | undefined {
  const metadata = ownContext(context)?.call.metadata;
  if (metadata) {
    const value = metadata.get(key)[0];
    return typeof value === "string" ? value : undefined;
  }
  return context.requestHeader.get(key) ?? undefined;
}

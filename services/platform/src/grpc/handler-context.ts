// A Connect HandlerContext built over a grpc-js server call. Headers are built lazily: most
// handlers read one metadata key, and building a Headers object per call is measurable.
import type { Metadata } from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { fail } from "../errors.js";

export interface ServerCallLike {
  metadata: Metadata;
  getPeer?(): string;
  getDeadline(): Date | number;
  getPath(): string;
  on(event: "cancelled", listener: () => void): unknown;
  removeListener(event: "cancelled", listener: () => void): unknown;
}

export interface CallScope {
  context: HandlerContext;
  /** Ends the scope: aborts the signal (so lingering downstream calls stop) and clears timers. */
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

export function openCallScope(call: ServerCallLike, service: DescService, method: DescMethod): CallScope {
  const controller = new AbortController();
  const rawDeadline = call.getDeadline();
  const deadline = rawDeadline instanceof Date ? rawDeadline.getTime() : rawDeadline;
  let timer: NodeJS.Timeout | undefined;
  if (Number.isFinite(deadline)) {
    const remaining = Math.max(0, deadline - Date.now());
    timer = setTimeout(() => controller.abort(fail("DEADLINE_EXCEEDED", "deadline exceeded")), remaining);
  }
  const onCancelled = () => controller.abort(new ConnectError("call cancelled by the client", Code.Canceled));
  call.on("cancelled", onCancelled);

  let requestHeader: Headers | undefined;
  let responseHeader: Headers | undefined;
  let responseTrailer: Headers | undefined;
  let values: ReturnType<typeof createContextValues> | undefined;
  const context: HandlerContext = {
    service,
    method,
    signal: controller.signal,
    timeoutMs: () => (Number.isFinite(deadline) ? deadline - Date.now() : undefined),
    requestMethod: "POST",
    get requestHeader() {
      return (requestHeader ??= metadataToHeaders(call.metadata));
    },
    get responseHeader() {
      return (responseHeader ??= new Headers());
    },
    get responseTrailer() {
      return (responseTrailer ??= new Headers());
    },
    protocolName: "grpc",
    get values() {
      return (values ??= createContextValues());
    },
    url: call.getPath(),
  };
  callMetadata.set(context, call.metadata);
  callControllers.set(context, controller);
  if (call.getPeer) callPeers.set(context, () => call.getPeer!());
  return {
    context,
    done() {
      if (timer) clearTimeout(timer);
      call.removeListener("cancelled", onCancelled);
      if (!controller.signal.aborted) controller.abort(CALL_FINISHED);
    },
  };
}

const callMetadata = new WeakMap<HandlerContext, Metadata>();
const callControllers = new WeakMap<HandlerContext, AbortController>();
const serverEnds = new WeakMap<HandlerContext, Error>();

/**
 * Ends a call from the server's side with `reason` (its credential expired or was revoked): the
 * handler sees its signal abort, and a stream ends with that status instead of OK.
 */
export function endCall(context: HandlerContext, reason: Error): void {
  const controller = callControllers.get(context);
  if (!controller || controller.signal.aborted) return;
  serverEnds.set(context, reason);
  controller.abort(reason);
}

/** Why the server ended the call early (endCall), if it did. */
export function endedBy(context: HandlerContext): Error | undefined {
  return serverEnds.get(context);
}
const callPeers = new WeakMap<HandlerContext, () => string>();

/** The header the gateway puts the client's address in (the one its trusted proxies saw). */
export const CLIENT_ADDRESS_HEADER = "x-client-address";

/**
 * The address of whoever is behind a call: what the gateway says it saw (x-client-address), else the
 * call's own peer. An internal caller could write any address there: use it for counting, never to
 * grant anything.
 */
export function clientAddressOf(context: HandlerContext): string {
  return requestMetadataValue(context, CLIENT_ADDRESS_HEADER) ?? callPeers.get(context)?.() ?? "unknown";
}

/** Reads one request metadata value without building Headers (the hot path: the bearer token). */
export function requestMetadataValue(context: HandlerContext, key: string): string | undefined {
  const metadata = callMetadata.get(context);
  if (metadata) {
    const value = metadata.get(key)[0];
    return typeof value === "string" ? value : undefined;
  }
  return context.requestHeader.get(key) ?? undefined;
}

// The shape of the services' interceptor chain: connect-es's (`(next) => (call) => …`), on grpc-js.
// Each interceptor is made once per method when the service is registered — it reads the method's
// entry in its policy then, not per call, and a method it has nothing to do for gets none of it — and
// the chain of each method is composed once, so a call pays only for the steps its method has.
import type { DescMethod } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { PeerIdentity } from "../call-policy.js";

/** One call, as the chain sees it. */
export interface ServerCall {
  /** The request message; for a method the client streams to, the messages as they arrive. */
  readonly message: unknown;
  /** Its context: method, deadline and signal, metadata, and what interceptors put there (the caller). */
  readonly context: HandlerContext;
}

/**
 * The rest of a call's chain. It answers the response message (or a promise of it); for a method
 * that streams its answers, a promise settled once the stream is over — rejected with the status it
 * ends with. It may also throw at once (a refusal before any work).
 */
export type CallHandler = (call: ServerCall) => unknown;

/** connect-es's interceptor shape: wraps the rest of the chain. */
export type Interceptor = (next: CallHandler) => CallHandler;

/** What the server tells an interceptor about itself when the interceptor is made for a method. */
export interface ServerTraits {
  /** How the transport names a calling service (mutual TLS); absent: only a service's own token does. */
  readonly peer?: PeerIdentity | undefined;
}

/**
 * An interceptor as a service (or the server) declares it: made for each method when the service is
 * registered, undefined for a method it has nothing to do for (whose calls then do not pass it).
 */
export type ServiceInterceptor = (method: DescMethod, server: ServerTraits) => Interceptor | undefined;

/** A method's chain: its interceptors, outermost first, around the step that calls its handler. */
export function composeChain(
  method: DescMethod,
  interceptors: readonly ServiceInterceptor[],
  server: ServerTraits,
  handler: CallHandler,
): CallHandler {
  let next = handler;
  for (let i = interceptors.length - 1; i >= 0; i--) next = interceptors[i]!(method, server)?.(next) ?? next;
  return next;
}

/** Whether a method streams its answers (its chain then answers once the stream is over). */
export const streamsAnswers = (method: DescMethod): boolean =>
  method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming";

const isPromise = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as { then?: unknown } | null)?.then === "function";

/**
 * Runs `next` and calls `done` with how it ended — at once when it answered or threw at once, else
 * when its promise settles — and gives back what `done` gives: an interceptor that must see every
 * outcome (metrics, a timer to clear) without a promise more for an answer that was there at once.
 */
export function settle(
  next: CallHandler,
  call: ServerCall,
  answered: (answer: unknown) => unknown,
  failed: (err: unknown) => unknown,
): unknown {
  let answer: unknown;
  try {
    answer = next(call);
  } catch (err) {
    return failed(err);
  }
  return isPromise(answer) ? answer.then(answered, failed) : answered(answer);
}

// Serves a protobuf-es service descriptor with Connect-shaped handlers on a grpc-js server:
// proto in, proto out, a HandlerContext with deadline and abort signal, streams as async iterables.
import type {
  handleBidiStreamingCall,
  handleClientStreamingCall,
  handleServerStreamingCall,
  handleUnaryCall,
  MethodDefinition,
  ServerDuplexStream,
  ServerReadableStream,
  ServerWritableStream,
  ServiceDefinition,
  UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethod, type DescService, type MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { authenticationFor, type AuthenticationPolicy } from "./authentication.js";
import { withCallScope } from "../call-deadline.js";
import { cutByDeadline, deadlineExceeded, endCall, endedBy, openCallScope, type CallScope } from "./handler-context.js";
import type { DeadlineLimits } from "./deadline-policy.js";
import type { PeerIdentity } from "./call-policy.js";
import { statusFromError } from "./status-details.js";
import { serverTelemetry, type ServerCallTelemetry } from "./telemetry.js";

/** What the server wants to hear about finished calls (logs; metrics and spans are made in telemetry.ts). */
export interface RpcObserver {
  /** A call failed with this error. */
  failed(err: unknown, method: DescMethod): void;
  /** A unary call answered OK after `ms` milliseconds. */
  answered?(method: DescMethod, ms: number): void;
}

/** Serializer pair of one message type, shared by client and server definitions. */
export function codecOf<D extends DescMessage>(desc: D) {
  return {
    serialize: (message: MessageShape<D>) => Buffer.from(toBinary(desc, message)),
    deserialize: (bytes: Buffer) => fromBinary(desc, bytes),
  };
}

function toMessage(desc: DescMessage, value: unknown) {
  return isMessage(value, desc) ? value : create(desc, value as never);
}

export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

/** The grpc-js MethodDefinition of a protobuf-es method descriptor. */
export function methodDefinition(method: DescMethod): MethodDefinition<object, object> {
  const input = codecOf(method.input);
  const output = codecOf(method.output);
  return {
    path: methodPath(method),
    requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
    responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
    requestSerialize: (m: object) => input.serialize(m as never),
    requestDeserialize: input.deserialize,
    responseSerialize: (m: object) => output.serialize(toMessage(method.output, m) as never),
    responseDeserialize: output.deserialize,
  };
}

async function writeAll(call: ServerWritableStream<object, object> | ServerDuplexStream<object, object>, source: AsyncIterable<unknown>, method: DescMethod, signal: AbortSignal) {
  for await (const item of source) {
    if (signal.aborted) return;
    // Respect HTTP/2 flow control: wait for drain instead of buffering without bound.
    if (!call.write(toMessage(method.output, item))) {
      await new Promise<void>((resolve) => {
        const done = () => { call.removeListener("drain", done); signal.removeEventListener("abort", done); resolve(); };
        call.once("drain", done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }
}

type AnyImpl = (input: never, context: HandlerContext) => unknown;

/**
 * The request side of a streaming call as an async iterable. A plain `for await` over the
 * stream destroys it when the loop ends, which would also kill the response side of a bidi call.
 * When the call is cancelled (or its deadline passes) a waiting read rejects with that reason,
 * so a handler blocked on the next message stops instead of hanging forever.
 */
function requestsOf(call: ServerReadableStream<object, object> | ServerDuplexStream<object, object>, signal: AbortSignal): AsyncIterable<object> {
  return {
    [Symbol.asyncIterator]() {
      const messages = call.iterator({ destroyOnReturn: false });
      return {
        next: () =>
          new Promise<IteratorResult<object>>((resolve, reject) => {
            if (signal.aborted) return reject(signal.reason);
            const onAbort = () => reject(signal.reason);
            signal.addEventListener("abort", onAbort, { once: true });
            messages.next().then(
              (r) => {
                signal.removeEventListener("abort", onAbort);
                resolve(r as IteratorResult<object>);
              },
              (err: unknown) => {
                signal.removeEventListener("abort", onAbort);
                reject(err);
              },
            );
          }),
        return: () => Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}

/**
 * Runs a handler behind what every call goes through first: `admit` (load shedding, refuses by
 * throwing) and then authentication as the policy requires for the method.
 */
function guard(method: DescMethod, handler: AnyImpl, admit: (() => void) | undefined, policy: AuthenticationPolicy | undefined, peer: PeerIdentity | undefined): AnyImpl {
  const authenticate = authenticationFor(policy, method, peer);
  if (!authenticate) {
    return admit
      ? (input, context) => {
          admit();
          return handler(input, context);
        }
      : handler;
  }
  const streamsOut = method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming";
  if (streamsOut) {
    // A live stream ends when the credential it was opened with stops being good.
    return async function* (input, context) {
      admit?.();
      const unwatch = await authenticate(context, (reason) => endCall(context, reason));
      try {
        yield* handler(input, context) as AsyncIterable<unknown>;
      } finally {
        unwatch();
      }
    };
  }
  return (input, context) => {
    admit?.();
    const checked = authenticate(context);
    return checked instanceof Promise ? checked.then(() => handler(input, context)) : handler(input, context);
  };
}

/**
 * grpc-js definition + implementation for one service; `onError` sees every failed call, `admit`
 * (when given) runs before each call and refuses it by throwing (load shedding), and `policy` says
 * how each method's calls are authenticated before the handler runs.
 */
export function adaptService<S extends DescService>(
  service: S,
  impl: Partial<ServiceImpl<S>>,
  observer: RpcObserver,
  admit?: () => void,
  policy?: AuthenticationPolicy,
  /** Where the calls that stream answers are kept while open (a server shutting down ends them). */
  openStreams?: Set<HandlerContext>,
  /** The server's default and ceiling of the deadline of calls that answer once. */
  deadlineLimits?: DeadlineLimits,
  /** How the transport names a calling service (mutual TLS). */
  peer?: PeerIdentity,
) {
  const definition: Record<string, MethodDefinition<object, object>> = {};
  const implementation: UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const handler = (impl as Record<string, AnyImpl | undefined>)[method.localName];
    if (!handler) continue;
    definition[method.name] = methodDefinition(method);
    implementation[method.name] = handlerFor(service, method, guard(method, handler.bind(impl), admit, policy, peer), observer, openStreams, deadlineLimits);
  }
  return { definition: definition as ServiceDefinition, implementation };
}

/**
 * A stream is over: it ends OK, or with its handler's error — but when the server ended it early
 * (credential gone, shutting down), with that reason, whatever the handler threw on the way out.
 */
function finishStream(call: ServerWritableStream<object, object> | ServerDuplexStream<object, object>, scope: { context: HandlerContext; done(): void }, telemetry: ServerCallTelemetry, reportAndStatus: (err: unknown) => unknown, failure?: unknown) {
  // A stream whose handler returned once its deadline passed (it watched the signal) was cut: it says so,
  // rather than ending OK a moment before grpc-js's own deadline would.
  const reason = endedBy(scope.context) ?? failure ?? cutByDeadline(scope.context);
  scope.done();
  telemetry.end(reason);
  if (reason !== undefined) call.emit("error", reportAndStatus(reason));
  else call.end();
}

/**
 * Runs a call's whole chain (handler, and the store beneath it) within the call's deadline, with its
 * request id (log lines, calls passed on) and, when tracing, its server span active.
 */
function inDeadline<T>(context: HandlerContext, telemetry: ServerCallTelemetry, work: () => T): T {
  const remaining = context.timeoutMs();
  return withCallScope(remaining === undefined ? undefined : Date.now() + remaining, telemetry.requestId, () => telemetry.run(work));
}

/**
 * The answer of a call that answers once, by the server's deadline when it set one (grpc-js enforces
 * only the caller's): past it the call ends with DEADLINE_EXCEEDED — its signal aborts, so the work
 * beneath it stops — whenever the handler would have answered.
 */
function byServerDeadline(scope: CallScope, answer: () => unknown): unknown {
  if (scope.serverDeadline === undefined) return answer();
  const at = scope.serverDeadline;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      const reason = deadlineExceeded();
      endCall(scope.context, reason);
      reject(reason);
    }, Math.max(0, at - Date.now()));
    Promise.resolve()
      .then(answer)
      .then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
  });
}

function handlerFor(service: DescService, method: DescMethod, impl: AnyImpl, observer: RpcObserver, openStreams?: Set<HandlerContext>, deadlineLimits?: DeadlineLimits) {
  const telemetryOf = serverTelemetry(method);
  const reportAndStatus = (err: unknown) => {
    observer.failed(err, method);
    return statusFromError(err);
  };
  /** A call scope that is kept among the open streams until it is done. */
  const streamScope = (call: Parameters<typeof openCallScope>[0]) => {
    const scope = openCallScope(call, service, method);
    openStreams?.add(scope.context);
    return {
      context: scope.context,
      done() {
        openStreams?.delete(scope.context);
        scope.done();
      },
    };
  };
  switch (method.methodKind) {
    case "unary": {
      const h: handleUnaryCall<object, object> = (call, callback) => {
        const started = performance.now();
        const scope = openCallScope(call, service, method, deadlineLimits);
        const telemetry = telemetryOf(call.metadata);
        inDeadline(scope.context, telemetry, () => Promise.resolve()
          .then(() => byServerDeadline(scope, () => impl(call.request as never, scope.context)))
          .then(
            (res) => { scope.done(); telemetry.end(undefined); callback(null, toMessage(method.output, res)); observer.answered?.(method, performance.now() - started); },
            (err) => { scope.done(); telemetry.end(err); callback(reportAndStatus(err)); },
          ));
      };
      return h;
    }
    case "server_streaming": {
      const h: handleServerStreamingCall<object, object> = (call) => {
        const scope = streamScope(call);
        const telemetry = telemetryOf(call.metadata);
        inDeadline(scope.context, telemetry, () => Promise.resolve()
          .then(() => writeAll(call, impl(call.request as never, scope.context) as AsyncIterable<unknown>, method, scope.context.signal))
          .then(() => finishStream(call, scope, telemetry, reportAndStatus), (err) => finishStream(call, scope, telemetry, reportAndStatus, err)));
      };
      return h;
    }
    case "client_streaming": {
      const h: handleClientStreamingCall<object, object> = (call: ServerReadableStream<object, object>, callback) => {
        const scope = openCallScope(call, service, method, deadlineLimits);
        const telemetry = telemetryOf(call.metadata);
        inDeadline(scope.context, telemetry, () => Promise.resolve()
          .then(() => byServerDeadline(scope, () => impl(requestsOf(call, scope.context.signal) as never, scope.context)))
          .then(
            (res) => { scope.done(); telemetry.end(undefined); callback(null, toMessage(method.output, res)); },
            (err) => { scope.done(); telemetry.end(err); callback(reportAndStatus(err)); },
          ));
      };
      return h;
    }
    case "bidi_streaming": {
      const h: handleBidiStreamingCall<object, object> = (call) => {
        const scope = streamScope(call);
        const telemetry = telemetryOf(call.metadata);
        inDeadline(scope.context, telemetry, () => Promise.resolve()
          .then(() => writeAll(call, impl(requestsOf(call, scope.context.signal) as never, scope.context) as AsyncIterable<unknown>, method, scope.context.signal))
          .then(() => finishStream(call, scope, telemetry, reportAndStatus), (err) => finishStream(call, scope, telemetry, reportAndStatus, err)));
      };
      return h;
    }
  }
}

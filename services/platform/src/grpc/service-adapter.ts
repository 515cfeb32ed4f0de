// Serves a protobuf-es service descriptor with Connect-shaped handlers on a grpc-js server: proto in,
// proto out, streams as async iterables. Each method's call runs through its interceptor chain
// (interceptors/: composed once per method here) to its handler; what the chain answers or throws is
// written back as the response or the gRPC status.
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
import {
  create,
  fromBinary,
  isMessage,
  toBinary,
  type DescMessage,
  type DescMethod,
  type DescService,
  type MessageShape,
} from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { openCallContext, type OpenCall } from "./handler-context.js";
import type { DeadlineLimits } from "./deadline-policy.js";
import type { PeerIdentity } from "./call-policy.js";
import { statusFromError } from "./status-details.js";
import {
  composeChain,
  settle,
  streamsAnswers,
  type CallHandler,
  type ServerCall,
  type ServiceInterceptor,
} from "./interceptors/chain.js";

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
    responseSerialize: (m: object) => output.serialize(toMessage(method.output, m)),
    responseDeserialize: output.deserialize,
  };
}

async function writeAll(
  call: ServerWritableStream<object, object> | ServerDuplexStream<object, object>,
  source: AsyncIterable<unknown>,
  method: DescMethod,
  signal: AbortSignal,
) {
  for await (const item of source) {
    if (signal.aborted) return;
    // Respect HTTP/2 flow control: wait for drain instead of buffering without bound.
    if (!call.write(toMessage(method.output, item))) {
      await new Promise<void>((resolve) => {
        const done = () => {
          call.removeListener("drain", done);
          signal.removeEventListener("abort", done);
          resolve();
        };
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
function requestsOf(
  call: ServerReadableStream<object, object> | ServerDuplexStream<object, object>,
  signal: AbortSignal,
): AsyncIterable<object> {
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

/** A call as the adapter hands it to the chain: with the stream its answers go to, when it streams them. */
class AdaptedCall implements ServerCall {
  constructor(
    readonly message: unknown,
    readonly context: OpenCall,
    readonly answers?: ServerWritableStream<object, object> | ServerDuplexStream<object, object>,
  ) {}
}

/**
 * The chain's last step: the handler. A method that answers once answers what its handler does; one
 * that streams its answers writes every message its handler yields, and is over when they are written.
 */
function handlerStep(method: DescMethod, handler: AnyImpl): CallHandler {
  if (!streamsAnswers(method)) return (call) => handler(call.message as never, call.context);
  return (call) => {
    const answers = handler(call.message as never, call.context) as AsyncIterable<unknown>;
    return writeAll((call as AdaptedCall).answers!, answers, method, call.context.signal);
  };
}

export interface ServiceAdapterOptions {
  /** What every call goes through before its handler, outermost first (interceptors/index.ts). */
  interceptors: readonly ServiceInterceptor[];
  /** How the transport names a calling service (mutual TLS), for the interceptors that need to know. */
  peer?: PeerIdentity | undefined;
  /** Where the calls that stream answers are kept while open (a server shutting down ends them). */
  openStreams?: Set<HandlerContext> | undefined;
  /** The server's default and ceiling of the deadline of calls that answer once. */
  deadlineLimits?: DeadlineLimits | undefined;
}

/** grpc-js definition + implementation for one service, each method's chain composed once, here. */
export function adaptService<S extends DescService>(
  service: S,
  impl: Partial<ServiceImpl<S>>,
  options: ServiceAdapterOptions,
) {
  const definition: Record<string, MethodDefinition<object, object>> = {};
  const implementation: UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const handler = (impl as Record<string, AnyImpl | undefined>)[method.localName];
    if (!handler) continue;
    definition[method.name] = methodDefinition(method);
    const last = handlerStep(method, handler.bind(impl));
    const chain = composeChain(method, options.interceptors, { peer: options.peer }, last);
    implementation[method.name] = callHandlerFor(service, method, chain, options);
  }
  return { definition: definition as ServiceDefinition, implementation };
}

type Respond = (err: unknown, answer?: object) => void;

/** A call that answers once: the chain's answer, or its error as the gRPC status. */
function answerOnce(chain: CallHandler, call: AdaptedCall, method: DescMethod, callback: Respond): void {
  const { context } = call;
  settle(
    chain,
    call,
    (answer) => {
      context.done();
      callback(null, toMessage(method.output, answer));
    },
    (err: unknown) => {
      context.done();
      callback(statusFromError(err));
    },
  );
}

/**
 * A call that streams its answers: kept among the open streams until its chain is over, then ended
 * OK or with its status.
 */
function answerStream(chain: CallHandler, call: AdaptedCall, openStreams: Set<HandlerContext> | undefined): void {
  const { context } = call;
  const stream = call.answers!;
  openStreams?.add(context);
  settle(
    chain,
    call,
    () => {
      openStreams?.delete(context);
      context.done();
      stream.end();
    },
    (err: unknown) => {
      openStreams?.delete(context);
      context.done();
      stream.emit("error", statusFromError(err));
    },
  );
}

function callHandlerFor(
  service: DescService,
  method: DescMethod,
  chain: CallHandler,
  { openStreams, deadlineLimits }: ServiceAdapterOptions,
) {
  switch (method.methodKind) {
    case "unary": {
      const h: handleUnaryCall<object, object> = (call, callback) => {
        const context = openCallContext(call, service, method, deadlineLimits);
        answerOnce(chain, new AdaptedCall(call.request, context), method, callback as Respond);
      };
      return h;
    }
    case "server_streaming": {
      const h: handleServerStreamingCall<object, object> = (call) => {
        const context = openCallContext(call, service, method);
        answerStream(chain, new AdaptedCall(call.request, context, call), openStreams);
      };
      return h;
    }
    case "client_streaming": {
      const h: handleClientStreamingCall<object, object> = (call: ServerReadableStream<object, object>, callback) => {
        const context = openCallContext(call, service, method, deadlineLimits);
        const requests = requestsOf(call, context.signal);
        answerOnce(chain, new AdaptedCall(requests, context), method, callback as Respond);
      };
      return h;
    }
    case "bidi_streaming": {
      const h: handleBidiStreamingCall<object, object> = (call) => {
        const context = openCallContext(call, service, method);
        answerStream(chain, new AdaptedCall(requestsOf(call, context.signal), context, call), openStreams);
      };
      return h;
    }
  }
}

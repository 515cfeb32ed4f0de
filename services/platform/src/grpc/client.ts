// Typed clients over long-lived grpc-js channels: the same Connect `Client<S>` shape handlers
// are written against, with the deadline, abort signal and metadata of every call honoured.
import {
  Client as GrpcChannelClient,
  credentials,
  Metadata,
  connectivityState,
  status as Status,
  type CallOptions as GrpcCallOptions,
  type ChannelOptions,
  type ClientDuplexStream,
  type ClientReadableStream,
  type ClientWritableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type CallOptions, type Client } from "@connectrpc/connect";
import { methodDefinition } from "./service-adapter.js";
import { errorFromStatus } from "./status-details.js";
import { errorInfoOf, fail } from "../errors.js";
import { MAX_MESSAGE_BYTES } from "../message-limits.js";
import { clientTelemetry, type ClientCallTelemetry } from "./telemetry.js";
import { installAsyncResourceBind } from "./async-resource-bind.js";
import { installCallTables } from "./call-tables.js";
import type { ChannelSecurity } from "./tls.js";
import { RETRY_BUDGET, retryBudgetOf } from "./retry-budget.js";

// Every process that calls over HTTP/2 loads this module: without these each call's objects outlive the
// call (see async-resource-bind.ts and call-tables.ts).
installAsyncResourceBind();
installCallTables();

/** A stream that fails before its first message (a call refused before it was sent). */
// eslint-disable-next-line require-yield -- it fails at once, by design
async function* failedStream(err: unknown): AsyncGenerator<never> {
  throw err;
}

export type { Client } from "@connectrpc/connect";

const DEFAULT_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.keepalive_permit_without_calls": 1,
  // Reconnect quickly after a peer restarts: calls wait for it (wait-for-ready, below), and every
  // attempt to a peer that is not back yet costs one refused connection.
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 1_000,
  // Channelz (grpc-js's introspection service) is on by default and counts every call on the channel
  // and subchannel; nothing here serves it (the metrics and traces count calls already).
  "grpc.enable_channelz": 0,
  // The servers' send limit: every answer a service may send is accepted (message-limits.ts).
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
};

/**
 * How a channel spreads and retries calls (a gRPC service config): round robin over every address the
 * target resolves to (a headless Service's pods, a static `ipv4:` list), and — for the methods the
 * proto marks `idempotency_level = NO_SIDE_EFFECTS`, and only those — up to 3 attempts when a replica
 * answers UNAVAILABLE (it is stopping, or the connection broke). Other methods are never retried: a
 * second attempt could do their work twice. A retry is never sent after a LOAD_SHED refusal (its
 * pushback says not to: status-details.ts), and retries as a whole are held to a budget (retry-budget.ts).
 */
/** A method the proto marks free of side effects: safe to try again. */
const isRead = (method: DescMethod) => method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;

export function serviceConfig(services: readonly DescService[]): string {
  const reads = services.flatMap((service) =>
    service.methods.filter(isRead).map((m) => ({ service: service.typeName, method: m.name })),
  );
  return JSON.stringify({
    loadBalancingConfig: [{ round_robin: {} }],
    retryThrottling: RETRY_BUDGET,
    methodConfig:
      reads.length === 0
        ? []
        : [
            {
              name: reads,
              retryPolicy: {
                maxAttempts: 3,
                initialBackoff: "0.05s",
                maxBackoff: "0.5s",
                backoffMultiplier: 2,
                retryableStatusCodes: ["UNAVAILABLE"],
              },
            },
          ],
  });
}

/**
 * One long-lived HTTP/2 channel to a service; share it between every client of that address.
 * `services`: what is served there, for the retry policy of its reads; `security`: mutual TLS to that
 * service (tls.ts), absent: plaintext.
 */
export function openChannel(
  address: string,
  services: readonly DescService[] = [],
  options: ChannelOptions = {},
  security?: ChannelSecurity,
): GrpcChannelClient {
  return new GrpcChannelClient(address, security?.credentials ?? credentials.createInsecure(), {
    ...DEFAULT_CHANNEL_OPTIONS,
    "grpc.service_config": serviceConfig(services),
    // The config above is ours; a DNS TXT record does not replace it.
    "grpc.service_config_disable_resolution": 1,
    ...security?.options,
    ...options,
  });
}

/**
 * A call with a deadline waits for a ready connection until then (gRPC's wait-for-ready) instead of
 * failing at once while no replica can be reached: a peer restarting, or every replica between two
 * connections, costs the call time, not its answer. It waits only before it is sent — once sent, a
 * write is never sent twice. A call without a deadline (a follower's stream, which reconnects itself)
 * fails at once, as it would wait forever.
 */
const WAIT_FOR_READY = { waitForReady: true };

function metadataOf(options: CallOptions | undefined): Metadata {
  const metadata = new Metadata(options?.timeoutMs === undefined ? undefined : WAIT_FOR_READY);
  const headers = options?.headers;
  if (!headers) return metadata;
  // A plain record (the usual case) is copied as it is; a Headers object or entry list is normalised first.
  if (!(headers instanceof Headers) && !Array.isArray(headers)) {
    for (const key in headers) metadata.set(key.toLowerCase(), (headers as Record<string, string>)[key]!);
  } else {
    new Headers(headers).forEach((value, key) => metadata.set(key, value));
  }
  return metadata;
}

function grpcOptions(options: CallOptions | undefined): GrpcCallOptions {
  const timeoutMs = options?.timeoutMs;
  return timeoutMs === undefined ? {} : { deadline: Date.now() + Math.max(0, timeoutMs) };
}

/**
 * A call its connection cut before any status. grpc-js says UNAVAILABLE "Connection dropped" — or,
 * when the server destroyed the connection with other calls still on it (a connection at its age,
 * GRPC_MAX_CONNECTION_AGE_MS, once its grace ran out), for some of them INTERNAL "Received RST_STREAM
 * with code 0 (Call ended without gRPC status)": HTTP/2's NO_ERROR, and no answer from the service.
 * Both are the connection going, and are said alike: a read is tried again, a live stream reopened.
 */
const CUT_WITHOUT_STATUS = /^Received RST_STREAM with code 0 \(Call ended without gRPC status\)$/;

/** What a failed call is judged by: its abort signal, and the channel it waited on. */
interface CallContext {
  signal: AbortSignal | undefined;
  channel: GrpcChannelClient | undefined;
}

/** The error a call ended with: the abort reason when our own signal cancelled it. */
function callError(err: unknown, { signal, channel }: CallContext): ConnectError {
  if (signal?.aborted) {
    const reason: unknown = signal.reason;
    return reason instanceof ConnectError ? reason : new ConnectError("call cancelled", Code.Canceled);
  }
  if (err instanceof ConnectError) return err;
  if (neverSent(err, channel)) return fail("UPSTREAM_UNREACHABLE", NEVER_SENT);
  if (err && typeof err === "object" && "code" in err) {
    const status = err as ServiceError;
    if (status.code === (Code.Internal as number) && CUT_WITHOUT_STATUS.test(status.details))
      return new ConnectError("Connection dropped", Code.Unavailable);
    return errorFromStatus(status);
  }
  return ConnectError.from(err);
}

const NEVER_SENT = "no replica of the service could be reached before the call's deadline; the call was not sent";

/**
 * The call was never sent, so nothing was done — unreachable, not slow: its deadline passed while it
 * waited for a ready connection (grpc-js says where the time went: "Waiting for LB pick") and every
 * replica had failed to connect (the channel in TRANSIENT_FAILURE; a deadline that passes while a
 * first connection is still being made is only a deadline too short), or, without a deadline (no
 * wait), no connection could be made.
 */
function neverSent(err: unknown, channel: GrpcChannelClient | undefined): boolean {
  const status = err as Partial<ServiceError> | undefined;
  const details = status?.details ?? "";
  if (status?.code === Status.UNAVAILABLE) return /^(round_robin: )?No connection established/.test(details);
  return (
    status?.code === Status.DEADLINE_EXCEEDED &&
    details.includes("Waiting for LB pick") &&
    channel?.getChannel().getConnectivityState(false) === connectivityState.TRANSIENT_FAILURE
  );
}

function preflight(options: CallOptions | undefined): ConnectError | undefined {
  if (options?.signal?.aborted) return callError(undefined, { signal: options.signal, channel: undefined });
  if (options?.timeoutMs !== undefined && options.timeoutMs <= 0)
    return new ConnectError("deadline exceeded before the call", Code.DeadlineExceeded);
  return undefined;
}

/**
 * Starts a call without grpc-js's capture of the caller's stack (`new Error()` in every call, kept
 * to append to a failed call's error stack): a failure here becomes a ConnectError whose stack
 * nobody reads (the edge answers with the code and message; logs carry the message). It cost
 * ~11 µs of the ~48 µs a unary call takes to start on the gateway's request path (issue 15).
 */
export function withoutCallerStack<T>(start: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return start();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function cancelOnAbort(signal: AbortSignal | undefined, call: { cancel(): void }): () => void {
  if (!signal) return () => {};
  const onAbort = () => call.cancel();
  signal.addEventListener("abort", onAbort, { once: true });
  return () => signal.removeEventListener("abort", onAbort);
}

async function* readAll(
  call: ClientReadableStream<object> | ClientDuplexStream<object, object>,
  context: CallContext,
  release: () => void,
  telemetry: ClientCallTelemetry,
) {
  let finished = false;
  let failure: unknown;
  try {
    for await (const message of call) yield message;
    finished = true;
  } catch (err) {
    finished = true;
    throw (failure = callError(err, context));
  } finally {
    telemetry.end(failure);
    release();
    // The consumer stopped early (break / return): end only this stream, not the channel.
    if (!finished) call.cancel();
  }
}

async function pump(
  call: ClientWritableStream<object> | ClientDuplexStream<object, object>,
  method: DescMethod,
  requests: AsyncIterable<unknown>,
) {
  try {
    for await (const request of requests) {
      if (!call.write(create(method.input, request as never)))
        await new Promise((resolve) => call.once("drain", resolve));
    }
    call.end();
  } catch {
    call.cancel();
  }
}

export function createServiceClient<S extends DescService>(service: S, channel: GrpcChannelClient): Client<S> {
  const client: Record<string, unknown> = {};
  const budget = retryBudgetOf(channel);
  for (const method of service.methods) {
    const def = methodDefinition(method);
    const path = def.path;
    const ser = def.requestSerialize;
    const de = def.responseDeserialize;
    const telemetryOf = clientTelemetry(method);
    switch (method.methodKind) {
      case "unary": {
        const attempt = (request: object, options?: CallOptions) =>
          new Promise((resolve, reject) => {
            const early = preflight(options);
            if (early) return reject(early);
            const signal = options?.signal;
            let release = () => {};
            const metadata = metadataOf(options);
            const telemetry = telemetryOf(metadata);
            const message = create(method.input, request as never);
            const call = withoutCallerStack(() =>
              channel.makeUnaryRequest(path, ser, de, message, metadata, grpcOptions(options), (err, value) => {
                release();
                if (err) {
                  const failure = callError(err, { signal, channel });
                  telemetry.end(failure);
                  reject(failure);
                } else {
                  telemetry.end(undefined);
                  resolve(value);
                }
              }),
            );
            release = cancelOnAbort(signal, call);
          });
        // The channel's retry policy cannot retry a call whose answer had begun when its replica died
        // (it counts as committed): a read gets one more attempt here, within the same deadline and
        // the channel's retry budget.
        client[method.localName] = !isRead(method)
          ? attempt
          : (request: object, options?: CallOptions) => {
              const deadlineAt = options?.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
              // A plain promise chain, not an async function: this runs on every read (fewer promises and ticks).
              return attempt(request, options).then(
                (answer) => {
                  budget.succeeded();
                  return answer;
                },
                (err: unknown) => {
                  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) throw err;
                  budget.failed();
                  // A replica shedding load is busy, not gone: asking again at once only adds to it.
                  if (errorInfoOf(err)?.reason === "LOAD_SHED" || options?.signal?.aborted || !budget.allowsRetry)
                    throw err;
                  if (deadlineAt !== undefined && deadlineAt - Date.now() < 50) throw err;
                  return new Promise((r) => setTimeout(r, 20)).then(() =>
                    attempt(
                      request,
                      deadlineAt === undefined ? options : { ...options, timeoutMs: deadlineAt - Date.now() },
                    ),
                  );
                },
              );
            };
        break;
      }
      case "server_streaming":
        client[method.localName] = (request: object, options?: CallOptions) => {
          const early = preflight(options);
          if (early) return failedStream(early);
          const metadata = metadataOf(options);
          const telemetry = telemetryOf(metadata);
          const message = create(method.input, request as never);
          const call = withoutCallerStack(() =>
            channel.makeServerStreamRequest(path, ser, de, message, metadata, grpcOptions(options)),
          );
          return readAll(call, { signal: options?.signal, channel }, cancelOnAbort(options?.signal, call), telemetry);
        };
        break;
      case "client_streaming":
        client[method.localName] = (requests: AsyncIterable<unknown>, options?: CallOptions) =>
          new Promise((resolve, reject) => {
            const early = preflight(options);
            if (early) return reject(early);
            const signal = options?.signal;
            let release = () => {};
            const metadata = metadataOf(options);
            const telemetry = telemetryOf(metadata);
            const call = withoutCallerStack(() =>
              channel.makeClientStreamRequest(path, ser, de, metadata, grpcOptions(options), (err, value) => {
                release();
                const failure = err ? callError(err, { signal, channel }) : undefined;
                telemetry.end(failure);
                if (failure) reject(failure);
                else resolve(value);
              }),
            );
            release = cancelOnAbort(signal, call);
            void pump(call, method, requests);
          });
        break;
      case "bidi_streaming":
        client[method.localName] = (requests: AsyncIterable<unknown>, options?: CallOptions) => {
          const early = preflight(options);
          if (early) return failedStream(early);
          const metadata = metadataOf(options);
          const telemetry = telemetryOf(metadata);
          const call = withoutCallerStack(() =>
            channel.makeBidiStreamRequest(path, ser, de, metadata, grpcOptions(options)),
          );
          void pump(call, method, requests);
          return readAll(call, { signal: options?.signal, channel }, cancelOnAbort(options?.signal, call), telemetry);
        };
        break;
    }
  }
  return client as Client<S>;
}

// The shape every route handler has: validated input in, status + representation out.
import type { IncomingHttpHeaders } from "node:http";
import type { CallOptions } from "@connectrpc/connect";
import type { Caller } from "@switchyard/platform/caller.js";
import type { UpstreamName, Upstreams } from "../upstreams.js";
import type { LiveFanout } from "./live-fanout.js";
import type { ServerSentEvent } from "./sse.js";
import type { EdgeCache } from "./edge-cache.js";
import type { CacheResult } from "./observability.js";
import type { ValidationProblem } from "./openapi.js";

/** One element of a body checked line by line (`x-switchyard-per-line-items`): its value, or its problem. */
export interface BodyLine {
  /** From 1: the position in a JSON array, the line in an NDJSON body. */
  line: number;
  value?: unknown;
  problem?: ValidationProblem;
}

export interface RouteContext {
  /** Path, query and header parameters, validated and typed by the OpenAPI document (headers lower-cased). */
  params: Record<string, unknown>;
  /** The validated JSON body, if the operation has one. */
  body: unknown;
  /** The body's elements, each checked on its own, when the operation takes its body line by line. */
  lines?: BodyLine[] | undefined;
  /** The verified caller on authenticated routes. */
  caller: Caller | undefined;
  /** The request asks for a live stream (runtime/streams.ts decides, for routing and limits alike). */
  eventStream: boolean;
  /** Options for a unary upstream call through the platform client: the remaining deadline, the request's cancellation (a light signal, runtime/cancellation.ts: pass it to platform clients only) and the caller's token. */
  callOptions(): CallOptions;
  /** Options for a long-lived upstream stream: no deadline; it ends when the client goes away. */
  streamCallOptions(): CallOptions;
  /** Upstream live streams shared by every subscriber of a key on this gateway (runtime/live-fanout.ts). */
  fanout: LiveFanout;
  /** The edge cache of the catalog and documents (runtime/edge-cache.ts); undefined when turned off. */
  edgeCache: EdgeCache | undefined;
  /** Says how the edge cache took part in the answer (metrics, access log). */
  cacheResult(result: CacheResult): void;
  /** The request headers (lower-case names), for content negotiation and conditional requests. */
  headers: IncomingHttpHeaders;
  upstreams: Upstreams;
  /** The request path, for Link headers. */
  path: string;
  /** The major version of the representation to read and answer with (path or media type). */
  version: number;
  /** The request's path prefix (`/v1`, `/v2`), for Location headers: a resource is named on the path it was asked on. */
  base: string;
}

export interface RouteResult {
  status: number;
  body?: unknown;
  /** The JSON body already serialized (an edge cache's answer): sent as it is, instead of `body`. */
  serialized?: Buffer;
  headers?: Record<string, string>;
  /** Answer with a text/event-stream of these events instead of a JSON body. */
  events?: AsyncIterable<ServerSentEvent>;
  /**
   * The position the stream starts after (the client's Last-Event-ID, or where its live tail begins):
   * the `id:` an in-band ending repeats when no event was written, so a reconnect misses nothing.
   */
  lastEventId?: string;
  /**
   * Then, once `events` ended, a tail pushed as it comes: every event goes to `writer` at once
   * (false: the stream is done); settles when the tail ends (rejects: it broke, said in-band).
   */
  follow?: (writer: (event: ServerSentEvent) => boolean) => Promise<void>;
}

export type RouteHandler = (ctx: RouteContext) => Promise<RouteResult>;

export interface RouteGroup {
  /** The service these routes call: named in 5xx messages, and it decides what metadata goes with the calls (upstream-headers.ts). */
  upstream: UpstreamName;
  handlers: Record<string, RouteHandler>;
}

/**
 * Work accepted and queued: 202 + Location of the job that does it. A replay of its Idempotency-Key
 * answers 202 again with the same Location (the job as it is now) and Idempotent-Replayed: true.
 */
export function accepted(body: unknown, location: string, replayed = false): RouteResult {
  return { status: 202, body, headers: replayed ? { location, "idempotent-replayed": "true" } : { location } };
}

/** A create's answer: 201 + Location the first time; a replay of its Idempotency-Key → 200, same body and Location. */
export function created(body: unknown, location: string, replayed = false): RouteResult {
  return replayed
    ? { status: 200, body, headers: { location, "idempotent-replayed": "true" } }
    : { status: 201, body, headers: { location } };
}

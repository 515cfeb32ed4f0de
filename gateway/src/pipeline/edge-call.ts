// What the edge's shared stages know of one request, /v1's or /rpc's: made when it arrives, filled
// in stage by stage (identify → admit → quota → stream slot → upstream metadata; edge-lifecycle.ts).
// One object a request, with a fixed shape: the stages are plain functions called with it, nothing
// per stage.
import type { Caller } from "@switchyard/platform/caller.js";
import type { Priority } from "@switchyard/platform/priority.js";
import type { Release } from "../runtime/concurrency-limit.js";
import type { RequestRecord } from "../runtime/observability.js";
import type { ResponseHeaders } from "../runtime/respond.js";

/** The part of the access record the stages write: which quota refused the request. */
export type QuotaRecord = Pick<RequestRecord, "requestId" | "quotaKind">;

export class EdgeCall {
  /** identify: a bearer token came with the request (valid or not). */
  presentedToken = false;
  /** identify: the verified caller; /v1 clears it again on routes that need no user, so nothing is passed on. */
  caller: Caller | undefined = undefined;
  /** identify: why the presented token was refused (answered 401 where a caller is needed). */
  refusedToken: Error | undefined = undefined;
  /** identify: whose quota and stream slots the request draws on (runtime/rate-limit.ts quotaKey). */
  quotaKey = "";
  /** admit: the request's place in the adaptive concurrency limit; undefined before, when shed, and once given back. */
  release: Release | undefined = undefined;
  /** The request asks for a live stream (an SSE feed, a server stream): it takes a stream slot. */
  liveStream = false;
  /** route: what the request is shed as, sent upstream with its calls (runtime/priority.ts); /rpc's calls are default. */
  priority: Priority = "default";
  /** stream slot: gives the live stream's slot back. */
  slot: (() => void) | undefined = undefined;

  constructor(
    /** The client's address (runtime/client-address.ts): the quota of a request without a valid token. */
    readonly address: string,
    /** The access record: its request id goes upstream; the stages say which quota refused. */
    readonly record: QuotaRecord,
    /** The answer's headers gathered so far: the stages add the quota's. */
    readonly headers: ResponseHeaders,
  ) {}

  /**
   * Gives the request's place in the concurrency limit back (once; nothing when it holds none).
   * `sample`: its latency teaches the limit (edge-lifecycle.ts says when).
   */
  giveBackPlace(sample = false): void {
    const release = this.release;
    if (release === undefined) return;
    this.release = undefined;
    release(sample);
  }

  /** The request id, passed to every upstream call (runtime/upstream-headers.ts reads it off the call). */
  get requestId(): string {
    return this.record.requestId;
  }
}

// The lifecycle of an edge call, the same for /v<N> (api.ts) and /rpc (rpc/front.ts): a call enters
// through its stages in order (admit → quota → shed → … → stream slot), each of which may refuse it;
// it draws its upstream calls' metadata; and when it is answered it gives back what it holds, its
// place in the concurrency limit teaching the limit by one rule (`finish`). The fronts say a refusal
// in their own protocol; what is refused, and when, is decided here once.
import type { HttpError } from "../runtime/errors.js";
import type { EdgeCall } from "./edge-call.js";
import type { Quota } from "./quota.js";

/** A stage a call enters through: reads and fills the call, and returns its refusal, if it refuses. */
export type EdgeStage = (call: EdgeCall) => HttpError | undefined | Promise<HttpError | undefined>;

/** How an answered call ended, as far as the concurrency limit is concerned. */
export interface CallEnd {
  /** The answer came from upstream work: not a refusal of the edge's, not the edge cache's memory. */
  upstreamWork: boolean;
  /** The answer's HTTP status; on /rpc, the one /v<N> gives the same failure (runtime/errors.ts). */
  status: number;
}

/**
 * What the limit learns from an answered call: its latency, only if the answer did the upstream work
 * and the mesh did not fail it (a 5xx says nothing of how long the work takes: a cut deadline says
 * the deadline, an unreachable service nothing at all).
 */
export function teachesLimit(end: CallEnd): boolean {
  return end.upstreamWork && end.status < 500;
}

export interface EdgeLifecycle {
  /**
   * An answer the edge gives itself, outside the limit (a refused route, the API document): one
   * request drawn on the quota; its refusal past it.
   */
  charge(call: EdgeCall): Promise<HttpError | undefined>;
  /**
   * The call's way in, stage by stage: the first refusal (the call then holds nothing), or undefined:
   * it holds a place in the limit, and a live stream one of its caller's slots.
   */
  enter(call: EdgeCall): Promise<HttpError | undefined>;
  /** A live stream is open: its place goes back, teaching nothing (it is long by design). */
  opened(call: EdgeCall): void;
  /** The call is answered (a live stream: it has ended): everything it holds goes back. */
  finish(call: EdgeCall, end: CallEnd): void;
}

export function edgeLifecycle(quota: Quota, stages: readonly EdgeStage[]): EdgeLifecycle {
  return {
    async charge(call) {
      return quota.settle(call, await quota.ask(call, true));
    },
    async enter(call) {
      for (const stage of stages) {
        const step = stage(call);
        // Most stages decide at once: only a promise is awaited (a turn of the event loop each).
        const refusal = step instanceof Promise ? await step : step;
        if (refusal !== undefined) {
          release(call, false);
          return refusal;
        }
      }
      return undefined;
    },
    opened(call) {
      call.giveBackPlace();
    },
    finish(call, end) {
      release(call, teachesLimit(end));
    },
  };
}

function release(call: EdgeCall, sample: boolean): void {
  call.giveBackPlace(sample);
  const slot = call.slot;
  call.slot = undefined;
  slot?.();
}

// The lifecycle of an edge call, the same for /v<N> (api.ts) and /rpc (rpc/front.ts): a call enters
// through its stages in order (admit → quota → shed → any stage added → stream slot), each of which
// may refuse it; it draws its upstream calls' metadata (edge-policy.ts); and when it is answered it
// gives back what it holds, its place in the concurrency limit teaching the limit by one rule
// (`teachesLimit`). The fronts say a refusal in their own protocol; what is refused, and when, and
// what the limit learns, is decided here once.
import type { HttpError } from "../runtime/errors.js";
import type { RateDecision } from "../runtime/rate-limit.js";
import type { Admission } from "./admit.js";
import type { EdgeCall } from "./edge-call.js";
import type { Quota } from "./quota.js";
import type { TakeStreamSlot } from "./stream-slot.js";

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

/** The stages every call enters through, in this order. */
export interface LifecycleStages {
  admission: Admission;
  quota: Quota;
  takeStreamSlot: TakeStreamSlot;
  /** Stages more, entered after the shed and before the stream slot. */
  added: readonly EdgeStage[];
}

export function edgeLifecycle({ admission, quota, takeStreamSlot, added }: LifecycleStages): EdgeLifecycle {
  /** Admitted or not: the quota settled (429 before 503), the shed, then the rest. */
  function admitted(call: EdgeCall, decision: RateDecision): HttpError | undefined | Promise<HttpError | undefined> {
    const refusal = quota.settle(call, decision) ?? (call.release === undefined ? admission.shed(call) : undefined);
    return refusal ?? rest(call, 0);
  }

  /** The stages added, from the `from`th, then the stream slot of a live stream. */
  function rest(call: EdgeCall, from: number): HttpError | undefined | Promise<HttpError | undefined> {
    for (let i = from; i < added.length; i++) {
      const step = added[i]!(call);
      // Most stages decide at once: only a promise is waited for (a turn of the event loop each).
      if (step instanceof Promise)
        return step.then((refusal) => (refusal === undefined ? rest(call, i + 1) : refused(call, refusal)));
      if (step !== undefined) return refused(call, step);
    }
    return call.liveStream ? takeStreamSlot(call) : undefined;
  }

  return {
    async charge(call) {
      return quota.settle(call, await quota.ask(call, true));
    },
    enter(call) {
      // The one wait of the way in is the quota's (the limiter's promise): the rest decide at once.
      return admission.admit(call).then((decision) => admitted(call, decision));
    },
    opened(call) {
      call.giveBackPlace();
    },
    finish(call, end) {
      release(call, teachesLimit(end));
    },
  };
}

/** A stage added refused the call: what it holds goes back (the lifecycle's own stages give theirs back themselves). */
function refused(call: EdgeCall, refusal: HttpError): HttpError {
  release(call, false);
  return refusal;
}

function release(call: EdgeCall, sample: boolean): void {
  call.giveBackPlace(sample);
  const slot = call.slot;
  call.slot = undefined;
  slot?.();
}

// Stage: admit — a place in the adaptive concurrency limit (runtime/concurrency-limit.ts). Beyond the
// limit a request is shed at once (503 + Retry-After), before any work is spent on it, instead of
// queueing. A shed request draws nothing on the quota (the refusal is the gateway's) and carries it as
// it stands — so admission asks the quota (quota.ts) with or without a place, and the quota's 429
// comes before the shed's 503. A live stream is admitted the same way and gives its place back once
// open (it is long by design, and says nothing of latency). While the limit sheds, the call's priority
// moves its cut-off (sheddable below the limit, critical above it).
import type { Priority } from "@switchyard/platform/priority.js";
import type { AdaptiveConcurrencyLimit } from "../runtime/concurrency-limit.js";
import { edgeError, type HttpError } from "../runtime/errors.js";
import type { RateDecision } from "../runtime/rate-limit.js";
import type { EdgeCall } from "./edge-call.js";
import type { Quota } from "./quota.js";

export interface Admission {
  /** Takes a place if there is one, then asks the quota: drawn on with a place, only read without. */
  admit(call: EdgeCall): Promise<RateDecision>;
  /** The refusal of a call admission found no place for (after its quota was settled): counted, one instance. */
  shed(call: EdgeCall): HttpError;
}

export function admissionStage(
  concurrency: AdaptiveConcurrencyLimit,
  quota: Quota,
  onShed: (priority: Priority) => void,
): Admission {
  // Made once: a refusal answered often under pressure.
  const shed = edgeError("LOAD_SHED", "the gateway is at capacity; retry after the Retry-After delay", {
    "retry-after": "1",
  });
  return {
    admit(call) {
      call.release = concurrency.tryAcquire(call.priority);
      return quota.ask(call, call.release !== undefined);
    },
    shed(call) {
      onShed(call.priority);
      return shed;
    },
  };
}

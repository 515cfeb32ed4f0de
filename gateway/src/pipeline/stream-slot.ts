// Stage: stream slot — each caller holds only so many live streams at once (runtime/streams.ts,
// GATEWAY_MAX_STREAMS_PER_CALLER), the SSE feed's and /rpc's server streams together: the slot is
// theirs until the stream closes. Past it: 429 TOO_MANY_STREAMS, the place in the limit given back.
import { edgeError, type HttpError } from "../runtime/errors.js";
import type { StreamSlots } from "../runtime/streams.js";
import type { EdgeCall } from "./edge-call.js";

/** Takes one of the caller's slots (`call.slot` gives it back), or says why not. */
export type TakeStreamSlot = (call: EdgeCall) => HttpError | undefined;

export function streamSlotStage(slots: StreamSlots, maxPerCaller: number): TakeStreamSlot {
  const message = `at most ${maxPerCaller} live streams at once; close one first`;
  return function takeStreamSlot(call) {
    call.slot = slots.take(call.quotaKey);
    if (call.slot) return undefined;
    call.record.quotaKind = "streams";
    call.giveBackPlace();
    return edgeError("TOO_MANY_STREAMS", message, { "retry-after": "5" });
  };
}

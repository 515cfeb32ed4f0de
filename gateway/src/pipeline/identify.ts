// Stage: identify — who is asking. A presented bearer token is verified before anything is drawn on a
// quota, so only a real user has a quota of their own; an absent or invalid one draws on the client
// address's. A header seen before is known at once, without a promise (the read path's fast path).
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import { edgeError } from "../runtime/errors.js";
import { quotaKey } from "../runtime/rate-limit.js";
import type { EdgeCall } from "./edge-call.js";

/** Sets the call's caller (or the refusal of its token) and quota key; a promise only while a new token is verified. */
export type Identify = (call: EdgeCall, authorization: string | undefined) => Promise<void> | undefined;

export function identifyStage(verifier: TokenVerifier): Identify {
  async function verify(call: EdgeCall, authorization: string): Promise<void> {
    try {
      call.caller = await verifier.verifyAuthorization(authorization);
    } catch (err) {
      call.refusedToken = err instanceof Error ? err : new Error(String(err));
    }
    call.quotaKey = quotaKey(call.caller, call.address);
  }

  return function identify(call, authorization) {
    if (authorization !== undefined) {
      call.presentedToken = true;
      const known = verifier.knownAuthorization(authorization);
      if (!known) return verify(call, authorization);
      call.caller = known;
    }
    call.quotaKey = quotaKey(call.caller, call.address);
    return undefined;
  };
}

/**
 * A route that needs a user: no token, or an invalid one, is refused here (401), never passed on. A
 * route that needs none gets no caller, so no token goes upstream with its calls.
 */
export function requireCaller(call: EdgeCall, required: boolean): Error | undefined {
  if (!required) {
    call.caller = undefined;
    return undefined;
  }
  if (call.caller) return undefined;
  return call.refusedToken ?? edgeError("UNAUTHENTICATED", "a bearer token is required");
}

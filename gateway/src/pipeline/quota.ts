// Stage: quota — the caller's share of requests per window (runtime/rate-limit.ts), drawn on by every
// API answer, even a refused route's; read without drawing by a request the gateway sheds. Every
// answer carries the quota as it stands (X-RateLimit-*); past it, 429 comes before any other answer.
import type { HttpError } from "../runtime/errors.js";
import { edgeError } from "../runtime/errors.js";
import type { RateDecision, RateLimiter } from "../runtime/rate-limit.js";
import type { EdgeCall } from "./edge-call.js";

export interface Quota {
  /** Draws one request on the call's quota (`draw`), or reads it as it stands: the limiter's own promise. */
  ask(call: EdgeCall, draw: boolean): Promise<RateDecision>;
  /**
   * The quota's headers on the answer. Past the quota: the refusal (RATE_LIMITED, one instance), said
   * to the access record (the user's quota or the address's), and the place in the limit given back.
   */
  settle(call: EdgeCall, decision: RateDecision): HttpError | undefined;
}

export function quotaStage(rateLimiter: RateLimiter, limit: number, windowSeconds: number): Quota {
  // Made once: a refusal answered often under pressure.
  const rateLimited = edgeError("RATE_LIMITED", rateLimitedMessage(limit, windowSeconds));
  return {
    ask: (call, draw) => (draw ? rateLimiter.check(call.quotaKey) : rateLimiter.peek(call.quotaKey)),
    settle(call, decision) {
      const headers = call.headers;
      for (const name in decision.headers) headers[name] = decision.headers[name]!;
      if (decision.allowed) return undefined;
      call.record.quotaKind = call.caller !== undefined ? "user" : "address";
      call.giveBackPlace();
      return rateLimited;
    },
  };
}

/** What a refusal for the quota says, on /v1 and /rpc alike. */
export function rateLimitedMessage(limit: number, windowSeconds: number): string {
  return `rate limit of ${limit} requests per ${windowSeconds} s reached; retry after the Retry-After delay`;
}

// The quota of every /v1 request: per user when it carries a valid token (verified first, so a
// made-up token buys no quota of its own), per client address otherwise. Counters live in Redis
// when REDIS_URL is set, so every gateway replica draws on one quota; without it (or while Redis is
// unreachable) they live in this process.
import type { Caller } from "@switchyard/platform/caller.js";
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";

export interface RateLimitOptions {
  limit: number;
  windowSeconds: number;
  redisUrl?: string | undefined;
  keyPrefix: string;
}

export interface RateDecision {
  allowed: boolean;
  /** X-RateLimit-Limit / -Remaining / -Reset, plus Retry-After when refused. */
  headers: Record<string, string>;
}

export interface RateLimiter {
  /** Draws one request from the quota named by `key` (see quotaKey). */
  check(key: string): Promise<RateDecision>;
  /** The quota named by `key` as it stands, drawing nothing (for an answer that did no work: a shed one). */
  peek(key: string): Promise<RateDecision>;
  close(): Promise<void>;
}

/** Whose quota a request draws on: its verified user's (all their tokens together), else its client address's. */
export function quotaKey(caller: Caller | undefined, address: string): string {
  return caller ? `user:${caller.tenantId}:${caller.userId}` : `addr:${address}`;
}

export function createRateLimiter(options: RateLimitOptions): RateLimiter {
  const memory = new RateLimiterMemory({ points: options.limit, duration: options.windowSeconds, keyPrefix: options.keyPrefix });
  let redis: Redis | undefined;
  let limiter: RateLimiterAbstract = memory;
  if (options.redisUrl) {
    // Fail fast instead of queueing commands while Redis is away; the in-process insurance answers meanwhile.
    redis = new Redis(options.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000, lazyConnect: false });
    redis.on("error", () => {});
    limiter = new RateLimiterRedis({ storeClient: redis, points: options.limit, duration: options.windowSeconds, keyPrefix: options.keyPrefix, insuranceLimiter: memory });
  }
  const limitText = String(options.limit);
  const headersOf = (res: Pick<RateLimiterRes, "remainingPoints" | "msBeforeNext">, allowed: boolean): Record<string, string> => {
    const headers: Record<string, string> = {
      "x-ratelimit-limit": limitText,
      "x-ratelimit-remaining": String(Math.max(0, allowed ? res.remainingPoints : 0)),
      "x-ratelimit-reset": String(Math.ceil((Date.now() + res.msBeforeNext) / 1000)),
    };
    if (!allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
    return headers;
  };
  // Made once: every request's draw settles through these (no frame of its own per request).
  const drawn = (res: RateLimiterRes): RateDecision => ({ allowed: true, headers: headersOf(res, true) });
  const refused = (err: unknown): RateDecision => {
    if (err instanceof RateLimiterRes) return { allowed: false, headers: headersOf(err, false) };
    throw err;
  };
  return {
    check: (key) => limiter.consume(key, 1).then(drawn, refused),
    async peek(key) {
      const res = await limiter.get(key);
      // A quota not drawn on in this window: all of it left, the window starting now.
      if (!res) return { allowed: true, headers: headersOf({ remainingPoints: options.limit, msBeforeNext: options.windowSeconds * 1000 }, true) };
      const allowed = res.remainingPoints > 0;
      return { allowed, headers: headersOf(res, allowed) };
    },
    async close() {
      await redis?.quit().catch(() => redis?.disconnect());
    },
  };
}

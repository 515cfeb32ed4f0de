// The quota of every /v1 request: per user when it carries a valid token (verified first, so a
// made-up token buys no quota of its own), per client address otherwise. Counters live in Redis
// when REDIS_URL is set, so every gateway replica draws on one quota (shared-quota.ts: how exactly);
// without it (or while Redis is unreachable) they live in this process.
import type { Caller } from "@switchyard/platform/caller.js";
import { Redis } from "ioredis";
import { reportRedisConnected } from "@switchyard/platform/metrics.js";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { SharedQuota, type QuotaState } from "./shared-quota.js";

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
  const limitText = String(options.limit);
  const decision = (allowed: boolean, remaining: number, msBeforeReset: number): RateDecision => {
    const headers: Record<string, string> = {
      "x-ratelimit-limit": limitText,
      "x-ratelimit-remaining": String(allowed ? Math.max(0, remaining) : 0),
      "x-ratelimit-reset": String(Math.ceil((Date.now() + msBeforeReset) / 1000)),
    };
    if (!allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(msBeforeReset / 1000)));
    return { allowed, headers };
  };
  // Made once: every request's draw settles through these (no frame of its own per request).
  const decided = (state: QuotaState): RateDecision => decision(state.allowed, state.remaining, state.msBeforeReset);
  const drawnInMemory = (res: RateLimiterRes): RateDecision => decision(true, res.remainingPoints, res.msBeforeNext);
  const refusedInMemory = (err: unknown): RateDecision => {
    if (err instanceof RateLimiterRes) return decision(false, 0, err.msBeforeNext);
    throw err;
  };

  // The counters of this process: the quota without Redis, and the insurance while Redis is away.
  const memory = new RateLimiterMemory({
    points: options.limit,
    duration: options.windowSeconds,
    keyPrefix: options.keyPrefix,
  });
  const inMemory = {
    draw: (key: string): Promise<QuotaState> =>
      memory.consume(key, 1).then(
        (res) => ({ allowed: true, remaining: res.remainingPoints, msBeforeReset: res.msBeforeNext }),
        (err: unknown) => {
          if (err instanceof RateLimiterRes) return { allowed: false, remaining: 0, msBeforeReset: err.msBeforeNext };
          throw err;
        },
      ),
    async peek(key: string): Promise<QuotaState> {
      const res = await memory.get(key);
      // A quota not drawn on in this window: all of it left, the window starting now.
      if (!res) return { allowed: true, remaining: options.limit, msBeforeReset: options.windowSeconds * 1000 };
      return { allowed: res.remainingPoints > 0, remaining: res.remainingPoints, msBeforeReset: res.msBeforeNext };
    },
  };
  if (!options.redisUrl) {
    return {
      check: (key) => memory.consume(key, 1).then(drawnInMemory, refusedInMemory),
      peek: (key) => inMemory.peek(key).then(decided),
      close: async () => {},
    };
  }
  // Fail fast instead of queueing commands while Redis is away; the in-process insurance answers meanwhile.
  const redis = new Redis(options.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    lazyConnect: false,
  });
  redis.on("error", () => {});
  // ioredis connects again by itself (back-off up to 2 s); until it has, the quota is counted here.
  const unreport = reportRedisConnected("quotas", () => redis.status === "ready");
  const shared = new SharedQuota(redis, {
    limit: options.limit,
    windowSeconds: options.windowSeconds,
    keyPrefix: options.keyPrefix,
    insurance: inMemory,
  });
  return {
    check: (key) => shared.draw(key).then(decided),
    peek: (key) => shared.peek(key).then(decided),
    async close() {
      unreport();
      shared.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

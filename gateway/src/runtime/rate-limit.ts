// The quota of every /v1 request: per credential (the bearer token), per client address when
// anonymous. Counters live in Redis when REDIS_URL is set, so every gateway replica draws on one
// quota; without it (or while Redis is unreachable) they live in this process.
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";

export interface RateLimitOptions {
  limit: number;
  windowSeconds: number;
  redisUrl?: string | undefined;
  keyPrefix: string;
  /** Take the client address from X-Forwarded-For (only behind a proxy that sets it). */
  trustProxy: boolean;
}

export interface RateDecision {
  allowed: boolean;
  /** X-RateLimit-Limit / -Remaining / -Reset, plus Retry-After when refused. */
  headers: Record<string, string>;
}

export interface RateLimiter {
  check(req: IncomingMessage): Promise<RateDecision>;
  close(): Promise<void>;
}

// A credential's key is a hash (the token itself never becomes a Redis key); a client sends the same
// token many times, so its hash is kept. Bounded: when full it starts over, so random tokens cost no more
// than hashing every time.
const CREDENTIAL_KEYS_KEPT = 4_096;
const credentialKeys = new Map<string, string>();

function credentialKey(authorization: string): string {
  let key = credentialKeys.get(authorization);
  if (key === undefined) {
    if (credentialKeys.size >= CREDENTIAL_KEYS_KEPT) credentialKeys.clear();
    key = `cred:${createHash("sha256").update(authorization).digest("base64url").slice(0, 32)}`;
    credentialKeys.set(authorization, key);
  }
  return key;
}

/** Whose quota a request draws on. */
export function quotaKey(req: IncomingMessage, trustProxy: boolean): string {
  const authorization = req.headers.authorization;
  if (authorization) return credentialKey(authorization);
  const forwarded = trustProxy ? String(req.headers["x-forwarded-for"] ?? "").split(",")[0]?.trim() : "";
  return `addr:${forwarded || req.socket.remoteAddress || "unknown"}`;
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
  const headersOf = (res: RateLimiterRes, allowed: boolean): Record<string, string> => {
    const headers: Record<string, string> = {
      "x-ratelimit-limit": String(options.limit),
      "x-ratelimit-remaining": String(Math.max(0, allowed ? res.remainingPoints : 0)),
      "x-ratelimit-reset": String(Math.ceil((Date.now() + res.msBeforeNext) / 1000)),
    };
    if (!allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
    return headers;
  };
  return {
    async check(req) {
      try {
        const res = await limiter.consume(quotaKey(req, options.trustProxy), 1);
        return { allowed: true, headers: headersOf(res, true) };
      } catch (err) {
        if (err instanceof RateLimiterRes) return { allowed: false, headers: headersOf(err, false) };
        throw err;
      }
    },
    async close() {
      await redis?.quit().catch(() => redis?.disconnect());
    },
  };
}

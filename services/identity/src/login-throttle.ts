// Login throttling. Failed logins are counted per account (tenant + email, whether or not such an
// account exists: the answer must not tell) and per client address, over a 15-minute window. Past
// LOGIN_FAILURES_ALLOWED failures an account is refused for LOGIN_BLOCK_SECONDS, doubling with every
// further failure up to 15 minutes; an address gets four times the allowance (it may serve many
// people). While refused, every attempt — the right password too — gets 429 with Retry-After, and no
// password is checked at all. Counters live in Redis when REDIS_URL is set, so every identity replica
// shares them; without it (or while Redis is away) in this process.
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from "rate-limiter-flexible";
import { fail } from "@switchyard/platform/errors.js";

export const FAILURE_WINDOW_SECONDS = 15 * 60;
export const MAX_BLOCK_SECONDS = 15 * 60;
/** An address may fail this many times more often than one account before it is refused. */
const ADDRESS_ALLOWANCE_FACTOR = 4;

export interface LoginThrottleOptions {
  failuresAllowed: number;
  firstBlockSeconds: number;
  redisUrl?: string | undefined;
  keyPrefix?: string;
}

/** The block after the n-th failure of a key allowed `allowed` of them (0: none yet). */
export function blockSeconds(failures: number, allowed: number, firstBlockSeconds: number): number {
  if (failures < allowed) return 0;
  return Math.min(MAX_BLOCK_SECONDS, firstBlockSeconds * 2 ** Math.min(failures - allowed, 20));
}

const digest = (value: string) => createHash("sha256").update(value).digest("base64url").slice(0, 32);

export class LoginThrottle {
  private readonly redis: Redis | undefined;
  private readonly failures: RateLimiterAbstract;
  private readonly blocks: RateLimiterAbstract;

  constructor(private readonly options: LoginThrottleOptions) {
    const prefix = options.keyPrefix ?? "switchyard:login";
    // Counting only: the refusal is the block below.
    const failureOptions = { points: Number.MAX_SAFE_INTEGER, duration: FAILURE_WINDOW_SECONDS, keyPrefix: `${prefix}:failures` };
    const blockOptions = { points: 1, duration: 1, keyPrefix: `${prefix}:blocks` };
    if (options.redisUrl) {
      this.redis = new Redis(options.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000 });
      this.redis.on("error", () => {});
      this.failures = new RateLimiterRedis({ storeClient: this.redis, ...failureOptions, insuranceLimiter: new RateLimiterMemory(failureOptions) });
      this.blocks = new RateLimiterRedis({ storeClient: this.redis, ...blockOptions, insuranceLimiter: new RateLimiterMemory(blockOptions) });
    } else {
      this.failures = new RateLimiterMemory(failureOptions);
      this.blocks = new RateLimiterMemory(blockOptions);
    }
  }

  private keys(tenantId: string, email: string, address: string) {
    return [
      { key: `acct:${digest(`${tenantId}\u0000${email.trim().toLowerCase()}`)}`, allowed: this.options.failuresAllowed },
      { key: `addr:${digest(address)}`, allowed: this.options.failuresAllowed * ADDRESS_ALLOWANCE_FACTOR },
    ];
  }

  /** Refuses (429 LOGIN_THROTTLED, with the seconds to wait) while the account or the address is blocked. */
  async check(tenantId: string, email: string, address: string): Promise<void> {
    let waitMs = 0;
    for (const { key } of this.keys(tenantId, email, address)) {
      const res = await this.blocks.get(key);
      if (res && res.consumedPoints > 1) waitMs = Math.max(waitMs, res.msBeforeNext);
    }
    if (waitMs > 0) {
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      throw fail("LOGIN_THROTTLED", `too many failed logins: try again in ${seconds} s`, { retry_after_seconds: String(seconds) });
    }
  }

  /** Counts a failure; past the allowance, blocks the key for its (growing) time. */
  async failed(tenantId: string, email: string, address: string): Promise<void> {
    for (const { key, allowed } of this.keys(tenantId, email, address)) {
      const { consumedPoints } = await this.failures.consume(key, 1);
      const seconds = blockSeconds(consumedPoints, allowed, this.options.firstBlockSeconds);
      if (seconds > 0) await this.blocks.block(key, seconds);
    }
  }

  /** A good login clears the account's failures (not the address's: others may be guessing from it). */
  async succeeded(tenantId: string, email: string, address: string): Promise<void> {
    const [account] = this.keys(tenantId, email, address);
    await this.failures.delete(account!.key);
  }

  /** Resolves once Redis answers (or after 2 s without it: the counters stay in this process meanwhile). */
  async ready(): Promise<void> {
    const redis = this.redis;
    if (!redis || redis.status === "ready") return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        redis.off("ready", done);
        resolve();
      };
      const timer = setTimeout(done, 2_000);
      redis.once("ready", done);
    });
  }

  async close(): Promise<void> {
    await this.redis?.quit().catch(() => this.redis?.disconnect());
  }
}

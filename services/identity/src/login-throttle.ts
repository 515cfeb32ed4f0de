// Login throttling. Every attempt is counted before its password is checked, atomically (in Redis
// when REDIS_URL is set, so every identity replica shares the counts; without it, or while Redis is
// away, in this process), and refused with 429 LOGIN_THROTTLED and the seconds to wait — without any
// password checked — when a key that applies to it is blocked or has no allowance left for it:
// failures in the last 15 minutes plus the attempts being judged may not pass the allowance, so N
// parallel guesses get at most the allowance judged. Three keys, all digests (never an email or an
// address in the clear), all counted for every attempt:
// - the pair (account, address): LOGIN_FAILURES_ALLOWED failures;
// - the account (tenant + email, whether or not such an account exists: the answer must not tell),
//   from every address: four times as many;
// - the address, across accounts (credential stuffing): four times as many too.
// From an address the account signed in from before (KnownAddresses) only the pair applies: failures
// made elsewhere do not lock the owner out there, while guessing from everywhere else stays bounded
// per account. A key that reaches its allowance is blocked for LOGIN_BLOCK_SECONDS; after a block one
// attempt at a time is judged, and each failure doubles the block, up to 15 minutes.
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import { reportRedisConnected } from "@switchyard/platform/metrics.js";
import {
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
  type RateLimiterRes,
} from "rate-limiter-flexible";
import { fail } from "@switchyard/platform/errors.js";
import { KnownAddresses } from "./known-addresses.js";

export const FAILURE_WINDOW_SECONDS = 15 * 60;
export const MAX_BLOCK_SECONDS = 15 * 60;
/** The account and the address may fail this many times more often than one pair before they are refused. */
const WIDE_ALLOWANCE_FACTOR = 4;
/** Longer than any attempt is judged: a process that dies while judging one holds its count no longer. */
const JUDGING_WINDOW_SECONDS = 60;
/** The wait told to an attempt refused only because others are being judged (no block yet). */
const IN_FLIGHT_RETRY_MS = 1_000;
/** A point is given back only this long before its window ends: never into the next window, where it would go negative. */
const GIVE_BACK_MARGIN_MS = 1_000;

export interface LoginThrottleOptions {
  failuresAllowed: number;
  firstBlockSeconds: number;
  redisUrl?: string | undefined;
  keyPrefix?: string;
}

/** One admitted attempt; it ends with exactly one of these. */
export interface LoginAttempt {
  /** Wrong password or no such account: a failure on every key, each blocked once past its allowance. */
  failed(): Promise<void>;
  /** Signed in: the pair's failures are forgotten and the address is known; the account's and the address's are kept. */
  succeeded(): Promise<void>;
  /** Not judged after all (the check was shed): counts as nothing. */
  abandoned(): Promise<void>;
}

/** The block after the n-th failure of a key allowed `allowed` of them (0: none yet). */
export function blockSeconds(failures: number, allowed: number, firstBlockSeconds: number): number {
  if (failures < allowed) return 0;
  return Math.min(MAX_BLOCK_SECONDS, firstBlockSeconds * 2 ** Math.min(failures - allowed, 20));
}

const digest = (value: string) => createHash("sha256").update(value).digest("base64url").slice(0, 32);

interface ThrottleKey {
  key: string;
  allowed: number;
  /** Whether this key may refuse the attempt (it is counted either way). */
  applies: boolean;
}

export class LoginThrottle {
  private readonly redis: Redis | undefined;
  private unreport: () => void = () => {};
  /** Failures over the 15-minute window. */
  private readonly failures: RateLimiterAbstract;
  /** Attempts admitted and not yet ended (counted before the password is checked). */
  private readonly judging: RateLimiterAbstract;
  private readonly blocks: RateLimiterAbstract;
  private readonly known: KnownAddresses;

  constructor(private readonly options: LoginThrottleOptions) {
    const prefix = options.keyPrefix ?? "switchyard:login";
    // Counting only: the refusals are decided in begin().
    const failureOptions = {
      points: Number.MAX_SAFE_INTEGER,
      duration: FAILURE_WINDOW_SECONDS,
      keyPrefix: `${prefix}:failures`,
    };
    const judgingOptions = {
      points: Number.MAX_SAFE_INTEGER,
      duration: JUDGING_WINDOW_SECONDS,
      keyPrefix: `${prefix}:judging`,
    };
    const blockOptions = { points: 1, duration: 1, keyPrefix: `${prefix}:blocks` };
    if (options.redisUrl) {
      const redis = new Redis(options.redisUrl, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        connectTimeout: 2_000,
      });
      redis.on("error", () => {});
      // ioredis connects again by itself; until it has, the counters are this process's own.
      this.unreport = reportRedisConnected("login counters", () => redis.status === "ready");
      const shared = (opts: typeof failureOptions) =>
        new RateLimiterRedis({ storeClient: redis, ...opts, insuranceLimiter: new RateLimiterMemory(opts) });
      this.redis = redis;
      this.failures = shared(failureOptions);
      this.judging = shared(judgingOptions);
      this.blocks = shared(blockOptions);
    } else {
      this.failures = new RateLimiterMemory(failureOptions);
      this.judging = new RateLimiterMemory(judgingOptions);
      this.blocks = new RateLimiterMemory(blockOptions);
    }
    this.known = new KnownAddresses(this.redis, `${prefix}:known`);
  }

  /**
   * Counts an attempt and admits it to have its password checked, or refuses it (429 LOGIN_THROTTLED,
   * with the seconds to wait) with its count given back.
   */
  async begin(tenantId: string, email: string, address: string): Promise<LoginAttempt> {
    const account = digest(`${tenantId}\u0000${email.trim().toLowerCase()}`);
    const pair = digest(`${account}\u0000${address}`);
    const known = await this.known.has(pair);
    const allowed = this.options.failuresAllowed;
    const keys: ThrottleKey[] = [
      { key: `pair:${pair}`, allowed, applies: true },
      { key: `acct:${account}`, allowed: allowed * WIDE_ALLOWANCE_FACTOR, applies: !known },
      { key: `addr:${digest(address)}`, allowed: allowed * WIDE_ALLOWANCE_FACTOR, applies: !known },
    ];
    const takenAt = Date.now();
    const taken = await Promise.all(keys.map(({ key }) => this.judging.consume(key)));
    const giveBack = () => this.giveBack(keys, taken, takenAt);
    // Read after counting: an attempt that ended before has its failure counted by then (failed()
    // counts it before it gives its point back), so none is missed between the two.
    const [failures, blocks] = await Promise.all([
      Promise.all(keys.map(({ key }) => this.failures.get(key))),
      Promise.all(keys.map(({ key }) => this.blocks.get(key))),
    ]);
    let waitMs = 0;
    keys.forEach(({ applies, allowed }, i) => {
      if (!applies) return;
      const blocked = blocks[i] && blocks[i].consumedPoints > 1 ? blocks[i].msBeforeNext : 0;
      // Left of the allowance; after a block, one attempt at a time.
      const left = Math.max(1, allowed - (failures[i]?.consumedPoints ?? 0));
      if (blocked > 0) waitMs = Math.max(waitMs, blocked);
      else if (taken[i]!.consumedPoints > left) waitMs = Math.max(waitMs, IN_FLIGHT_RETRY_MS);
    });
    if (waitMs > 0) {
      await giveBack();
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      throw fail("LOGIN_THROTTLED", `too many failed logins: try again in ${seconds} s`, {
        retry_after_seconds: String(seconds),
      });
    }

    let ended = false;
    const end = async (settle: () => Promise<void>) => {
      if (ended) return;
      ended = true;
      await settle();
      await giveBack();
    };
    return {
      failed: () =>
        end(async () => {
          await Promise.all(
            keys.map(async ({ key, allowed }) => {
              const { consumedPoints } = await this.failures.consume(key, 1);
              const seconds = blockSeconds(consumedPoints, allowed, this.options.firstBlockSeconds);
              if (seconds > 0) await this.blocks.block(key, seconds);
            }),
          );
        }),
      succeeded: () =>
        end(async () => {
          await Promise.all([this.failures.delete(keys[0]!.key), this.known.remember(pair)]);
        }),
      abandoned: () => end(async () => {}),
    };
  }

  private async giveBack(keys: ThrottleKey[], taken: RateLimiterRes[], takenAt: number): Promise<void> {
    const now = Date.now();
    await Promise.all(
      keys.map(({ key }, i) =>
        now < takenAt + taken[i]!.msBeforeNext - GIVE_BACK_MARGIN_MS ? this.judging.reward(key, 1) : undefined,
      ),
    );
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
    this.unreport();
    await this.redis?.quit().catch(() => this.redis?.disconnect());
  }
}

// The quota counted in Redis, shared by every gateway replica, without a Redis round trip for every
// request where that costs no exactness worth keeping. A replica reserves points of a key's window in
// Redis (one atomic INCRBY) before it admits anything against them, so the replicas together never
// admit more than the quota. A key this replica draws on more often than every 100 ms reserves a few
// points ahead — at most 1 % of the quota — and the draws after it are answered in memory; a
// window found used up is refused in memory until it resets (no replica ever gives points back, so
// nothing can free one). The price: points one replica reserved and has not drawn are not the other
// replicas' to give, so a key can be refused up to (replicas × 1 % of the quota) early, and the
// remaining count a replica reports leaves out what the others drew since its last reservation.
// A quota under 100 reserves nothing ahead: every draw is one exact round trip.
//
// The counters are the ones rate-limiter-flexible keeps (`<prefix>:<key>`, an integer with the
// window as its expiry, made by the same script), so gateways of the previous release share them
// during a rollout.
import type { Redis } from "ioredis";

/** A draw's or a peek's outcome: whether the request may go on, what is left, when the window resets. */
export interface QuotaState {
  allowed: boolean;
  remaining: number;
  msBeforeReset: number;
}

export interface SharedQuotaOptions {
  limit: number;
  windowSeconds: number;
  keyPrefix: string;
  /** Answers a draw or a peek while Redis cannot: the counters of this process alone. */
  insurance: { draw(key: string): Promise<QuotaState>; peek(key: string): Promise<QuotaState> };
}

// rate-limiter-flexible's script: the window's counter made with its expiry if missing, then drawn on.
const RESERVE_SCRIPT = `redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl}`;

/** Reserved points held back on a replica: at most this share of the quota (and at most MAX_SPARE). */
const SPARE_SHARE = 0.01;
const MAX_SPARE = 64;
/** An allowance used up within this long grows the next one (doubling its spare); one that lasted past SLOW_MS has none. */
const FAST_MS = 100;
const SLOW_MS = 1_000;
/** Keys whose allowance is kept in memory at once; beyond them a key is drawn one exact round trip at a time. */
const MAX_KEYS = 100_000;

/** One key's points on this replica, in its current window. */
class Allowance {
  /** Reserved in Redis and not drawn yet. */
  held = 0;
  /** What the shared counter had left (quota − reserved) at the last reservation. */
  sharedLeft = 0;
  /** When the window resets (epoch ms); what is held is void then. */
  resetAt = 0;
  /** When the last reservation was answered. */
  reservedAt = 0;
  /** Points the next reservation takes beyond the draws waiting for it. */
  spare = 0;
  /** Every point of the window is reserved: refused in memory until resetAt, once `held` is drawn. */
  usedUp = false;
  /** The reservation under way, and the draws waiting for it. */
  pending: Promise<void> | undefined = undefined;
  waiting = 0;
}

type ReserveCommand = (key: string, points: number, windowSeconds: number) => Promise<[number, number]>;

export class SharedQuota {
  private readonly allowances = new Map<string, Allowance>();
  private readonly maxSpare: number;
  private readonly reserveOn: ReserveCommand;
  private readonly sweeper: NodeJS.Timeout;
  /** Reservations made in Redis so far (round trips of draws; the tests read it). */
  reservations = 0;

  constructor(
    private readonly redis: Redis,
    private readonly options: SharedQuotaOptions,
  ) {
    this.maxSpare = Math.min(MAX_SPARE, Math.floor(options.limit * SPARE_SHARE));
    redis.defineCommand("switchyardQuotaReserve", { numberOfKeys: 1, lua: RESERVE_SCRIPT });
    this.reserveOn = (redis as unknown as { switchyardQuotaReserve: ReserveCommand }).switchyardQuotaReserve.bind(
      redis,
    );
    // Allowances of windows that ended go; a key back later starts afresh.
    this.sweeper = setInterval(() => this.sweep(), Math.min(options.windowSeconds, 60) * 1000).unref();
  }

  /**
   * Draws one request from `key`'s quota: in memory while this replica holds reserved points (or knows
   * the window used up), else after one reservation in Redis (the insurance's when Redis fails).
   */
  draw(key: string): Promise<QuotaState> {
    const allowance = this.allowances.get(key);
    if (allowance !== undefined && allowance.pending === undefined) {
      const now = Date.now();
      if (now < allowance.resetAt) {
        if (allowance.held > 0) return Promise.resolve(this.drawn(allowance, now));
        if (allowance.usedUp) return Promise.resolve(refused(allowance, now));
      }
    }
    return this.reserveAndDraw(key, allowance);
  }

  /** The quota named by `key` as it stands, drawing nothing. */
  async peek(key: string): Promise<QuotaState> {
    const allowance = this.allowances.get(key);
    const now = Date.now();
    const current = allowance !== undefined && now < allowance.resetAt ? allowance : undefined;
    if (current?.usedUp && current.held === 0) return refused(current, now);
    let consumed: string | null;
    let ttl: number;
    try {
      const replies = (await this.redis.multi().get(this.redisKey(key)).pttl(this.redisKey(key)).exec()) ?? [];
      const failed = replies.find(([err]) => err)?.[0];
      if (failed || replies.length !== 2) throw failed ?? new Error("the quota's counter was not read");
      [consumed, ttl] = [replies[0]![1] as string | null, replies[1]![1] as number];
    } catch {
      return this.options.insurance.peek(key);
    }
    // A quota not drawn on in this window: all of it left, the window starting now.
    if (consumed === null)
      return { allowed: true, remaining: this.options.limit, msBeforeReset: this.options.windowSeconds * 1000 };
    const remaining = Math.max(0, this.options.limit - Number(consumed)) + (current?.held ?? 0);
    return { allowed: remaining > 0, remaining, msBeforeReset: ttl };
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  private redisKey(key: string): string {
    return `${this.options.keyPrefix}:${key}`;
  }

  private drawn(allowance: Allowance, now: number): QuotaState {
    allowance.held--;
    return { allowed: true, remaining: allowance.sharedLeft + allowance.held, msBeforeReset: allowance.resetAt - now };
  }

  private async reserveAndDraw(key: string, known: Allowance | undefined): Promise<QuotaState> {
    let allowance = known;
    if (allowance === undefined) {
      allowance = new Allowance();
      if (this.allowances.size < MAX_KEYS) this.allowances.set(key, allowance);
    }
    for (;;) {
      if (allowance.pending !== undefined) {
        allowance.waiting++;
        await allowance.pending;
        allowance.waiting--;
      }
      const now = Date.now();
      if (now >= allowance.resetAt) {
        allowance.held = 0;
        allowance.usedUp = false;
      }
      if (allowance.held > 0) return this.drawn(allowance, now);
      if (allowance.usedUp) return refused(allowance, now);
      if (allowance.pending === undefined) {
        try {
          await this.reserve(key, allowance, now);
        } catch {
          return this.options.insurance.draw(key);
        }
      }
    }
  }

  /** Reserves this draw's point, one for each draw waiting, and the key's spare. */
  private async reserve(key: string, allowance: Allowance, now: number): Promise<void> {
    const lasted = now - allowance.reservedAt;
    if (lasted < FAST_MS) allowance.spare = Math.min(this.maxSpare, Math.max(1, allowance.spare * 2));
    else if (lasted > SLOW_MS) allowance.spare = 0;
    const wanted = 1 + allowance.waiting + allowance.spare;
    let done!: () => void;
    allowance.pending = new Promise<void>((resolve) => (done = resolve));
    this.reservations++;
    try {
      const [consumed, ttl] = await this.reserveOn(this.redisKey(key), wanted, this.options.windowSeconds);
      const answered = Date.now();
      allowance.reservedAt = answered;
      allowance.resetAt = answered + ttl;
      // Points past the quota are not granted; the counter keeps them (as every replica's does).
      allowance.held = Math.max(0, wanted - Math.max(0, consumed - this.options.limit));
      allowance.sharedLeft = Math.max(0, this.options.limit - consumed);
      allowance.usedUp = consumed >= this.options.limit;
    } finally {
      allowance.pending = undefined;
      done();
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, allowance] of this.allowances) {
      if (now >= allowance.resetAt && allowance.pending === undefined) this.allowances.delete(key);
    }
  }
}

function refused(allowance: Allowance, now: number): QuotaState {
  return { allowed: false, remaining: 0, msBeforeReset: allowance.resetAt - now };
}

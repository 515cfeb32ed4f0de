// The addresses an account has signed in from: a successful login remembers (account, address) for
// 30 days, so that its owner coming back from there is not refused for failures made elsewhere. In
// Redis when the login throttle has one (every replica then knows them), and always in this process
// too — bounded, the oldest forgotten first — which answers while Redis is away.
import type { Redis } from "ioredis";

export const KNOWN_ADDRESS_SECONDS = 30 * 24 * 60 * 60;
/** Pairs this process keeps at most (a few MB). */
export const KNOWN_ADDRESSES_IN_MEMORY = 100_000;

export class KnownAddresses {
  /** Pair digest → when it is forgotten (ms); in the order last remembered, oldest first. */
  private readonly remembered = new Map<string, number>();

  constructor(
    private readonly redis: Redis | undefined,
    private readonly keyPrefix: string,
  ) {}

  /** Whether the pair (a digest of account and address) signed in in the last 30 days. */
  async has(pair: string): Promise<boolean> {
    // This process's memory first: it also holds what was remembered while Redis was away.
    const until = this.remembered.get(pair);
    if (until !== undefined && until > Date.now()) return true;
    if (until !== undefined) this.remembered.delete(pair);
    if (this.redis?.status !== "ready") return false;
    return await this.redis.exists(this.keyOf(pair)).then(
      (found) => found === 1,
      () => false,
    );
  }

  async remember(pair: string): Promise<void> {
    this.remembered.delete(pair);
    this.remembered.set(pair, Date.now() + KNOWN_ADDRESS_SECONDS * 1000);
    if (this.remembered.size > KNOWN_ADDRESSES_IN_MEMORY) this.remembered.delete(this.remembered.keys().next().value!);
    if (this.redis?.status === "ready")
      await this.redis.set(this.keyOf(pair), "1", "EX", KNOWN_ADDRESS_SECONDS).catch(() => {});
  }

  private keyOf(pair: string): string {
    return `${this.keyPrefix}:${pair}`;
  }
}

// The edge caches' leases, and the wait that makes a write coherent with them: a write answers only
// once every cache holding a lease has applied it, or its lease has ended (a cache serves from memory
// only within its lease, so one that did not apply the write has stopped serving by then).
//
// A cache that keeps renewing without applying (its stream broken) is extended no more once a change
// has waited on it a whole lease: a write waits at most about two leases.
//
// Why this suffices (the store orders both under one lock): a lease renewed before the write's change
// committed is visible to the wait, which then waits for that cache; a lease renewed after it answers
// a required position at or past the change, and the cache serves only once it has applied that far.
import type { CacheLogStore } from "./store/cache-log/port.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

/** The wait looks again at least this often, in case an acknowledgement's notification was lost. */
const RECHECK_MS = 100;

export class CacheLeases {
  private stopListening: (() => Promise<void>) | undefined;
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly store: CacheLogStore,
    /** How long a renewal holds, counted by the cache from when it sent it. */
    readonly leaseMs: number,
  ) {}

  async start(): Promise<void> {
    // Any cache's renewal, on any replica, may be the one a write here waits for.
    this.stopListening = await this.store.watchCacheAcks(() => {
      for (const wake of this.waiting) wake();
    });
  }

  async stop(): Promise<void> {
    await this.stopListening?.();
    for (const wake of this.waiting) wake();
  }

  renew(
    subscriberId: string,
    appliedPosition: bigint,
    call?: CallScope,
  ): Promise<{ requiredPosition: bigint; extended: boolean }> {
    return this.store.renewCacheLease(subscriberId, appliedPosition, this.leaseMs, call);
  }

  release(subscriberId: string): Promise<void> {
    return this.store.releaseCacheLease(subscriberId);
  }

  /**
   * Resolves once every cache holding a lease has applied every change committed before the call (or
   * its lease has ended): at once with no cache behind, at most about two leases later. Call it after
   * the write's transaction committed and before answering.
   */
  async applied(): Promise<void> {
    let target: bigint | undefined;
    for (;;) {
      const { position, behind, untilMs } = await this.store.cachesBehind(target);
      if (behind === 0) return;
      target = position;
      await this.nextAck(Math.max(1, Math.min(untilMs, RECHECK_MS)));
    }
  }

  private nextAck(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiting.add(done);
    });
  }
}

// Keeps the edge cache (edge-cache.ts) coherent with content: follows content's cache change stream
// (WatchCacheChanges), drops what each change names, and renews the lease (cache-lease.ts) right after
// applying changes and every third of a lease. A stream that breaks or falls silent, or a lease that
// runs out, loses the subscription: the cache is emptied, serves nothing, and subscribes again from
// the current position (a fresh snapshot: an empty cache is coherent at any position).
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  CacheChangeKind,
  type ContentService,
  type WatchCacheChangesResponse,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import type { Client } from "@switchyard/platform/grpc";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { Faults } from "@switchyard/platform/faults.js";
import { CATALOG_GROUP, documentGroup, type EdgeCache } from "./edge-cache.js";
import type { CacheLease } from "./cache-lease.js";

/** What the follower works with. */
export interface CacheFollowerParts {
  content: Client<typeof ContentService>;
  /** The gateway's own service token: content gives the stream to the gateway only. */
  serviceToken: () => Promise<string>;
  cache: EdgeCache;
  lease: CacheLease;
  logger: Logger;
}

export interface CacheFollowerOptions {
  /** A stream without any message (content heartbeats every second) for this long is taken for dead. */
  silenceMs?: number;
  /** The wait before subscribing again after losing the subscription (doubled up to 8×). */
  retryMs?: number;
  /** Tests: a slow cache (CACHE_FAULT_POINTS). */
  faults?: Faults;
}

/**
 * gateway.hold-cache-change: holds each message of the change stream before applying it — a cache
 * slow to apply (a stalled event loop, a loaded machine), which writes must wait for.
 */
export const CACHE_FAULT_POINTS = ["gateway.hold-cache-change"] as const;

/** How often the follower looks at its lease and stream (renewals go every third of a lease). */
const TICK_MS = 100;
/** Until content's first answer says how long a lease is. */
const ASSUMED_LEASE_MS = 2_000;

export class CacheFollower {
  private stopped = false;
  private loop: Promise<void> | undefined;
  private current: AbortController | undefined;
  private subscriberId = "";
  private leaseMs = ASSUMED_LEASE_MS;
  private renewing = false;
  private renewAgain = false;
  private lastMessageAt = 0;
  private lastRenewalAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly silenceMs: number;
  private readonly retryMs: number;
  private readonly faults: Faults;
  private readonly content: Client<typeof ContentService>;
  private readonly serviceToken: () => Promise<string>;
  private readonly cache: EdgeCache;
  private readonly lease: CacheLease;
  private readonly logger: Logger;

  constructor(parts: CacheFollowerParts, options: CacheFollowerOptions = {}) {
    this.content = parts.content;
    this.serviceToken = parts.serviceToken;
    this.cache = parts.cache;
    this.lease = parts.lease;
    this.logger = parts.logger;
    this.silenceMs = options.silenceMs ?? 3_500;
    this.retryMs = options.retryMs ?? 250;
    this.faults = options.faults ?? new Faults();
  }

  start(): void {
    this.loop ??= this.run();
    // The periodic renewal, and the watch on silence and on the lease running out.
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.lease.lost();
    this.current?.abort();
    await this.loop;
    await this.release();
  }

  /**
   * Gives the lease of the subscription just lost up at once (memory answers nothing already), so no
   * write waits for this cache until its lease runs out. Best effort: that is only the bound.
   */
  private async release(): Promise<void> {
    const subscriberId = this.subscriberId;
    if (subscriberId === "") return;
    this.subscriberId = "";
    try {
      const headers = { [SERVICE_AUTHORIZATION]: `Bearer ${await this.serviceToken()}` };
      await this.content.renewCacheLease(
        { subscriberId, appliedPosition: 0n, release: true },
        { headers, timeoutMs: 500 },
      );
    } catch {
      // Its lease runs out by itself.
    }
  }

  private tick(): void {
    if (!this.current) return;
    if (this.lease.expired()) return this.lose("the cache's lease ran out");
    if (performance.now() - this.lastMessageAt > this.silenceMs) return this.lose("the change stream fell silent");
    if (performance.now() - this.lastRenewalAt >= this.leaseMs / 3) this.renew();
  }

  /** Ends the subscription: the loop empties the cache and subscribes again. */
  private lose(why: string): void {
    this.logger.warn({ reason: why }, "edge cache: subscription lost; serving from upstream until resynchronised");
    this.lease.lost();
    this.cache.clear();
    this.current?.abort();
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const abort = new AbortController();
      this.current = abort;
      this.lastMessageAt = performance.now();
      try {
        const headers = { [SERVICE_AUTHORIZATION]: `Bearer ${await this.serviceToken()}` };
        for await (const message of this.content.watchCacheChanges({}, { signal: abort.signal, headers })) {
          this.lastMessageAt = performance.now();
          if (message.changes.length > 0) await this.faults.holdIfFires(CACHE_FAULT_POINTS[0]);
          this.apply(message);
          failures = 0;
        }
        if (!abort.signal.aborted) this.logger.warn({}, "edge cache: content ended the change stream");
      } catch (err) {
        // A stream that was live and ends is routine when it opens again: content's server ends each
        // connection at its age (GRPC_MAX_CONNECTION_AGE_MS). One that does not open again is worth a warning.
        const level = failures === 0 ? "info" : "warn";
        if (!abort.signal.aborted && !this.stopped)
          this.logger[level](
            { message: err instanceof Error ? err.message : String(err) },
            "edge cache: the change stream failed",
          );
      }
      // Whatever ended it: nothing from memory until subscribed again, on an empty cache.
      this.lease.lost();
      this.cache.clear();
      this.current = undefined;
      if (this.stopped) return;
      void this.release();
      failures++;
      await sleep(this.retryMs * Math.min(8, 2 ** Math.min(3, failures - 1)));
    }
  }

  private apply(message: WatchCacheChangesResponse): void {
    if (message.subscribed) {
      // A fresh snapshot: an empty cache, starting after this position, under a new subscriber id.
      this.cache.clear();
      this.subscriberId = randomUUID();
      this.lease.subscribed(message.position);
      this.renew();
      return;
    }
    for (const change of message.changes) {
      if (change.kind === CacheChangeKind.DOCUMENT) this.cache.drop(documentGroup(change.tenantId, change.id));
      else this.cache.drop(CATALOG_GROUP); // the catalog, or a kind this gateway does not know: drop the most
    }
    this.lease.applied(message.position);
    // Tell content at once: a write is waiting for exactly this.
    if (message.changes.length > 0) this.renew();
  }

  /** One renewal at a time; asked for while one is on its way, another follows it. */
  private renew(): void {
    if (this.renewing) {
      this.renewAgain = true;
      return;
    }
    const ticket = this.lease.renewalSent();
    if (!ticket) return;
    this.renewing = true;
    this.lastRenewalAt = performance.now();
    const subscriberId = this.subscriberId;
    const appliedPosition = this.lease.position;
    void (async () => {
      try {
        const headers = { [SERVICE_AUTHORIZATION]: `Bearer ${await this.serviceToken()}` };
        const granted = await this.content.renewCacheLease(
          { subscriberId, appliedPosition },
          { headers, timeoutMs: Math.max(100, Math.floor(this.leaseMs / 3)) },
        );
        if (granted.leaseMs === 0) {
          // Content extends a cache no more once a change has waited on it a whole lease.
          if (ticket.subscription === this.lease.subscriptionNumber)
            this.lose("content did not extend the lease: the cache is behind a change");
        } else {
          this.leaseMs = granted.leaseMs;
          this.lease.granted(ticket, granted.leaseMs, granted.requiredPosition);
        }
      } catch (err) {
        this.logger.warn(
          { message: err instanceof Error ? err.message : String(err) },
          "edge cache: could not renew the lease",
        );
      } finally {
        this.renewing = false;
        if (this.renewAgain) {
          this.renewAgain = false;
          this.renew();
        }
      }
    })();
  }
}

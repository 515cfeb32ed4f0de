// This replica's reader of the cache change log, fanned out to the WatchCacheChanges streams of the
// edge caches connected here. Writers record each change (catalog item, document) in the change's own
// transaction with a NOTIFY (its store: SqlCacheLogStore.record); the NOTIFY only wakes this reader up, which
// then reads the log itself after the last position it passed on. So a notification lost while the
// listening connection was re-made loses nothing: the next wake-up or the heartbeat's read finds it.
// Positions increase in commit order (the writers' lock), so "after the last position" never skips.
import type { Logger } from "@switchyard/platform/logger.js";
import type { CacheChangeRecord, CacheLogStore } from "./store/cache-log/port.js";

export interface CacheChangeLogOptions {
  /** How often every stream gets a heartbeat (and the log is read, whatever was announced). */
  heartbeatMs?: number;
  /** Changes (and caches gone) older than this are forgotten; checked every minute. */
  keepMs?: number;
}

/** A batch of changes, oldest first, and the position the stream is at after them (empty: a heartbeat). */
export type CacheChangeListener = (changes: readonly CacheChangeRecord[], position: bigint) => void;

const READ_BATCH = 500;

export class CacheChangeLog {
  private readonly listeners = new Set<CacheChangeListener>();
  private readonly heartbeatMs: number;
  private readonly keepMs: number;
  private stopListening: (() => Promise<void>) | undefined;
  private timers: NodeJS.Timeout[] = [];
  /** The last change read and passed on. */
  private position = 0n;
  private reading: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly store: CacheLogStore,
    private readonly logger: Logger,
    options: CacheChangeLogOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? 1_000;
    this.keepMs = options.keepMs ?? 10 * 60_000;
  }

  async start(): Promise<void> {
    this.position = await this.store.latestCacheChange();
    this.stopListening = await this.store.watchCacheChanges(() => this.wake());
    // Read anything committed between the position and the LISTEN.
    this.wake();
    this.timers.push(
      setInterval(() => {
        void this.read().then(() => this.emit([]));
      }, this.heartbeatMs),
      setInterval(() => {
        this.store
          .pruneCacheLog(this.keepMs)
          .catch((err: unknown) => this.logger.warn({ message: String(err) }, "could not prune the cache change log"));
      }, 60_000),
    );
    for (const t of this.timers) t.unref();
  }

  /**
   * Subscribes a stream: every change after the position returned reaches `listener`, in order, with
   * heartbeats between. Returns the starting position and the unsubscribe function.
   */
  subscribe(listener: CacheChangeListener): { position: bigint; unsubscribe: () => void } {
    this.listeners.add(listener);
    return { position: this.position, unsubscribe: () => this.listeners.delete(listener) };
  }

  get subscriberCount(): number {
    return this.listeners.size;
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.stopListening?.();
    await this.reading;
  }

  private wake(): void {
    void this.read();
  }

  /** Reads the log after the position, one reader at a time; a wake-up during a read reads again after it. */
  private read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      try {
        do {
          this.again = false;
          for (;;) {
            const changes = await this.store.cacheChangesAfter(this.position, READ_BATCH);
            if (changes.length === 0) break;
            this.position = changes[changes.length - 1]!.position;
            this.emit(changes);
            if (changes.length < READ_BATCH) break;
          }
        } while (this.again);
      } catch (err) {
        this.logger.warn({ message: String(err) }, "could not read the cache change log");
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  private emit(changes: readonly CacheChangeRecord[]): void {
    for (const listener of this.listeners) listener(changes, this.position);
  }
}

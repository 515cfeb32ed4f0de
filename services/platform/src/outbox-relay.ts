// Hands a service's outbox events on (to the webhooks service), at least once: a batch of the oldest
// unrelayed events is sent, and marked relayed only once the receiver took it — a crash, a failed
// call or a lost answer leaves them unrelayed, to be sent again (the receiver records each event
// once, by its id). No transaction is held across the call: embedded PGlite runs one at a time.
// It wakes on the NOTIFY of a committed append (`appendEvent`); the poll is only a safety net. One
// replica relays at a time, the holder of a lease it renews; a killed holder's lease runs out and
// another replica takes it. The lease saves work, it is not what makes relaying correct: a holder
// stalled past its lease may still send a batch the next one sends too, which the receiver absorbs.
import type { Logger } from "./logger.js";
import { reportOutbox } from "./metrics.js";
import { releaseLease, takeLease } from "./store/leases.js";
import { markEventsRelayed, outboxChannel, unrelayedEvents, type OutboxEvent } from "./store/outbox.js";
import type { SqlDatabase } from "./store/engine.js";
import { WakeSignal } from "./wake-signal.js";

export interface OutboxRelayLease {
  /** The lease's name in the service's `leases` table. */
  name: string;
  /** Who holds it (this replica). */
  holder: string;
  /** How long a taken lease lasts: a killed holder's replacement starts relaying within about this long. */
  ttlMs: number;
}

export interface OutboxRelayOptions {
  /** How often the outbox is looked at without a notification (a safety net: a commit wakes the relay). */
  pollMs: number;
  /** The most events one call hands on. */
  batch: number;
  logger: Logger;
  /** Relay only while holding this lease; unset: relay always (a relay known to be the only one). */
  lease?: OutboxRelayLease;
}

const MOST_BACK_OFF_MS = 5_000;

export class OutboxRelay {
  private stopped = false;
  private running: Promise<void> | undefined;
  /** The pause between rounds, which a notification (or a stop) cuts short. */
  private readonly wakeSignal = new WakeSignal();
  /** Ends a hand-over in flight when the relay stops: a stopping service does not wait for the receiver. */
  private readonly stopping = new AbortController();
  /** The oldest event seen waiting, while it waits (the outbox's lag, a metric). */
  private oldestUnrelayed: Date | undefined;
  private unreport: (() => void) | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  /** Whether this replica holds the lease, as of `leaseCheckedAt` (Date.now()). */
  private holding = false;
  private leaseCheckedAt = -Infinity;

  constructor(
    private readonly db: SqlDatabase,
    private readonly send: (events: OutboxEvent[], signal: AbortSignal) => Promise<void>,
    private readonly options: OutboxRelayOptions,
  ) {}

  start(): void {
    this.unreport ??= reportOutbox(() => this.oldestUnrelayed);
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.wakeSignal.rouse();
    await this.running;
    this.unreport?.();
  }

  /** Whether this replica relays now (holds the lease, or needs none). */
  get relaying(): boolean {
    return this.options.lease === undefined || this.holding;
  }

  /** Hands on one batch; returns how many events it relayed. */
  async runOnce(): Promise<number> {
    const events = await unrelayedEvents(this.db, this.options.batch);
    this.oldestUnrelayed = events[0]?.occurredAt;
    if (events.length === 0) return 0;
    await this.send(events, this.stopping.signal);
    await markEventsRelayed(
      this.db,
      events.map((e) => e.id),
    );
    // A batch not full was all there was: none waits now.
    if (events.length < this.options.batch) this.oldestUnrelayed = undefined;
    return events.length;
  }

  /**
   * Takes or renews the lease when a third of its time has passed since it was last looked at (so a
   * holder renews well before it runs out, and a waiting replica tries that often), and says whether
   * this replica holds it.
   */
  private async holdsLease(): Promise<boolean> {
    const lease = this.options.lease;
    if (!lease) return true;
    const now = Date.now();
    if (now - this.leaseCheckedAt < lease.ttlMs / 3) return this.holding;
    const held = await takeLease(this.db, lease.name, lease.holder, lease.ttlMs);
    this.leaseCheckedAt = now;
    if (held !== this.holding)
      this.options.logger.info({ lease: lease.name }, held ? "relaying the outbox (lease taken)" : "outbox lease lost");
    this.holding = held;
    // Another replica reports the outbox's age.
    if (!held) this.oldestUnrelayed = undefined;
    return held;
  }

  private async loop(): Promise<void> {
    const lease = this.options.lease;
    // Awake often enough to renew the lease in time, or to try for it.
    const idleMs = lease ? Math.min(this.options.pollMs, lease.ttlMs / 3) : this.options.pollMs;
    let backOff = 0;
    while (!this.stopped) {
      let wait = idleMs;
      try {
        const holding = await this.holdsLease();
        await this.listenWhile(holding);
        const relayed = holding ? await this.runOnce() : 0;
        backOff = 0;
        // A full batch: more may be waiting.
        if (relayed === this.options.batch) continue;
      } catch (err) {
        backOff = Math.min(MOST_BACK_OFF_MS, Math.max(idleMs, backOff * 2));
        wait = backOff;
        this.options.logger.warn({ message: String(err), retryInMs: wait }, "could not relay outbox events; retrying");
      }
      if (!this.stopped) await this.wakeSignal.pause(wait);
    }
    await this.listenWhile(false).catch(() => {});
    // Let go at once: another replica takes over without waiting for the lease to run out.
    if (lease && this.holding) await releaseLease(this.db, lease.name, lease.holder).catch(() => {});
    this.holding = false;
  }

  /**
   * Only the relaying replica listens (on a server, one connection per process carries its LISTENs):
   * listening first, then reading, so an event committed in between is in one or the other. A lost
   * LISTEN connection (onResync) means notifications may be lost: the outbox is read at once. Not
   * listening leaves the poll, so a failure to listen is only a warning.
   */
  private async listenWhile(holding: boolean): Promise<void> {
    if (holding && !this.unlisten) {
      try {
        this.unlisten = await this.db.listen(
          outboxChannel(this.db.schema),
          () => this.wakeSignal.rouse(),
          () => this.wakeSignal.rouse(),
        );
      } catch (err) {
        this.options.logger.warn({ message: String(err) }, "could not LISTEN for outbox events; polling");
      }
    } else if (!holding && this.unlisten) {
      const unlisten = this.unlisten;
      this.unlisten = undefined;
      await unlisten();
    }
  }
}

// Hands a service's outbox events on (to the webhooks service), at least once: a batch of the oldest
// unrelayed events is sent, and marked relayed only once the receiver took it — a crash, a failed
// call or a lost answer leaves them unrelayed, to be sent again (the receiver records each event
// once, by its id). No transaction is held across the call: embedded PGlite runs one at a time.
// Replicas relaying at the same moment may send an event twice; the receiver absorbs that too.
import type { Logger } from "./logger.js";
import { reportOutbox } from "./metrics.js";
import { markEventsRelayed, unrelayedEvents, type OutboxEvent } from "./store/outbox.js";
import type { SqlDatabase } from "./store/engine.js";

export interface OutboxRelayOptions {
  /** How often the outbox is looked at while it is empty. */
  pollMs: number;
  /** The most events one call hands on. */
  batch: number;
  logger: Logger;
}

const MOST_BACK_OFF_MS = 5_000;

export class OutboxRelay {
  private stopped = false;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** Ends a hand-over in flight when the relay stops: a stopping service does not wait for the receiver. */
  private readonly stopping = new AbortController();
  /** The oldest event seen waiting, while it waits (the outbox's lag, a metric). */
  private oldestUnrelayed: Date | undefined;
  private unreport: (() => void) | undefined;

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
    this.wake?.();
    await this.running;
    this.unreport?.();
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

  private async loop(): Promise<void> {
    let backOff = 0;
    while (!this.stopped) {
      let wait = this.options.pollMs;
      try {
        const relayed = await this.runOnce();
        backOff = 0;
        // A full batch: more may be waiting.
        if (relayed === this.options.batch) continue;
      } catch (err) {
        backOff = Math.min(MOST_BACK_OFF_MS, Math.max(this.options.pollMs, backOff * 2));
        wait = backOff;
        this.options.logger.warn({ message: String(err), retryInMs: wait }, "could not relay outbox events; retrying");
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        timer.unref();
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }
}

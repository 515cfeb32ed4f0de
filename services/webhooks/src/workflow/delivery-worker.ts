// Delivers events, on every replica: claims due deliveries by lease (one holder each; a bound per
// endpoint, so a slow or dead endpoint holds up only its own), signs each as Standard Webhooks under
// every secret that signs now, makes one attempt, and records it with what follows — delivered,
// tried again later (back-off with jitter), or failed after 3 days, which may disable the endpoint.
// A replica killed mid-attempt loses only its leases: the deliveries are claimed again once they run
// out, and sent again (at least once; receivers deduplicate by the event id, `webhook-id`).
import type { Logger } from "@switchyard/platform/logger.js";
import { webhookAttemptDuration, webhookDeliveries } from "@switchyard/platform/metrics.js";
import { WakeSignal } from "@switchyard/platform/wake-signal.js";
import { nextAttemptAt, RETRY_SCHEDULE, type RetrySchedule } from "../domain/retries.js";
import { signedHeaders } from "../domain/signatures.js";
import type { SigningSecrets } from "../store/port.js";
import type { AttemptVerdict, ClaimedDelivery, DeliveriesStore } from "../store/delivery-port.js";
import type { AttemptOutcome, Delivery } from "./attempt.js";

export interface DeliveryWorkerOptions {
  /** Who holds the leases (this replica). */
  holder: string;
  /** How often due deliveries are looked for while none are found. */
  pollMs: number;
  /** Attempts one replica makes at once, and one endpoint's in flight across every replica. */
  concurrency: number;
  perEndpoint: number;
  /** Longer than an attempt can take (its timeout): a live holder never loses its lease. */
  leaseMs: number;
}

export interface DeliveryWorkerDeps {
  store: DeliveriesStore;
  secrets: (tenantId: string, endpointId: string) => Promise<SigningSecrets | undefined>;
  attempt: (delivery: Delivery) => Promise<AttemptOutcome>;
  logger: Logger;
  /** In [0, 1): the back-off's jitter. */
  random?: () => number;
  /** The back-off and give-up period (the defaults: 30 s doubling to 6 h, for 3 days). */
  retries?: RetrySchedule;
}

export class DeliveryWorker {
  private stopped = false;
  private running: Promise<void> | undefined;
  /** The pause between claims, which an event, an attempt's end or a stop cuts short. */
  private readonly wakeSignal = new WakeSignal();
  /** The attempts under way on this replica (at most `concurrency`). */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly deps: DeliveryWorkerDeps,
    private readonly options: DeliveryWorkerOptions,
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Looks for due deliveries now (an event was just recorded). */
  poke(): void {
    this.wakeSignal.rouse();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeSignal.rouse();
    await this.running;
  }

  /** One round: claims what is due and attempts it; returns how many deliveries it attempted. */
  async runOnce(): Promise<number> {
    const claimed = await this.claim(this.options.concurrency);
    await Promise.all(claimed.map((d) => this.deliver(d)));
    return claimed.length;
  }

  private claim(limit: number): Promise<ClaimedDelivery[]> {
    return this.deps.store.claimDue(this.options.holder, {
      limit,
      perEndpoint: this.options.perEndpoint,
      leaseMs: this.options.leaseMs,
    });
  }

  /**
   * A pool, not rounds: each attempt that ends frees its place for the next due delivery at once, so
   * an endpoint that never answers holds its own places (at most `perEndpoint`) until its attempts time
   * out, and nobody else's.
   */
  private async loop(): Promise<void> {
    while (!this.stopped) {
      const free = this.options.concurrency - this.inFlight.size;
      let claimed: ClaimedDelivery[] = [];
      if (free > 0) {
        try {
          claimed = await this.claim(free);
        } catch (err) {
          this.deps.logger.warn({ message: String(err) }, "could not claim webhook deliveries; trying again");
        }
      }
      for (const delivery of claimed) {
        const attempt: Promise<void> = this.deliver(delivery).finally(() => {
          this.inFlight.delete(attempt);
          this.wakeSignal.rouse();
        });
        this.inFlight.add(attempt);
      }
      // Nothing due (or no place free): wait for the poll, a new event, or an attempt that ends.
      if ((claimed.length === 0 || claimed.length === free) && !this.stopped)
        await this.wakeSignal.pause(this.options.pollMs);
    }
    await Promise.all(this.inFlight);
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    try {
      const secrets = await this.deps.secrets(delivery.tenantId, delivery.endpointId);
      // Deleted meanwhile: its deliveries went with it.
      if (!secrets) return;
      const attemptedAt = new Date();
      const headers = signedHeaders(
        { id: delivery.eventId, timestampSeconds: Math.floor(attemptedAt.getTime() / 1000), body: delivery.body },
        secrets.previous === undefined ? [secrets.current] : [secrets.current, secrets.previous],
      );
      const outcome = await this.deps.attempt({ url: delivery.url, headers: { ...headers }, body: delivery.body });
      const verdict = this.verdictOf(delivery, attemptedAt, outcome);
      const result = outcome.status === undefined ? "no_answer" : outcome.delivered ? "2xx" : "other_status";
      webhookAttemptDuration.labels({ result }).observe(outcome.latencyMs / 1000);
      webhookDeliveries.labels({ outcome: verdict.kind === "retry" ? "retried" : verdict.kind }).inc();
      const { endpointDisabled } = await this.deps.store.finishAttempt(
        delivery,
        this.options.holder,
        { attemptedAt, ...outcome },
        verdict,
      );
      if (verdict.kind === "failed")
        this.deps.logger.warn(
          { delivery: delivery.id, endpoint: delivery.endpointId, attempts: delivery.attempts + 1, endpointDisabled },
          "webhook delivery failed for good",
        );
    } catch (err) {
      // The lease runs out and the delivery is claimed again.
      this.deps.logger.warn({ delivery: delivery.id, message: String(err) }, "webhook delivery attempt not recorded");
    }
  }

  private verdictOf(delivery: ClaimedDelivery, attemptedAt: Date, outcome: AttemptOutcome): AttemptVerdict {
    if (outcome.delivered) return { kind: "delivered" };
    const schedule = this.deps.retries ?? RETRY_SCHEDULE;
    const next = nextAttemptAt(delivery.firstAttemptAt ?? attemptedAt, attemptedAt, delivery.attempts + 1, {
      schedule,
      ...(this.deps.random ? { random: this.deps.random } : {}),
    });
    return next ? { kind: "retry", at: next } : { kind: "failed", disableAfterMs: schedule.giveUpAfterMs };
  }
}

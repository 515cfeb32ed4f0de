// The reconciler: settles every money step left unsettled past its deadline — by a crash between
// the call to payments and the record of its outcome, a deadline, a lost connection — by asking
// payments what happened under the step's key (MoneySteps.resolve). One replica at a time does the
// work (a lease in the orders database, renewed every pass); it runs at start and then every
// ORDERS_RECONCILE_INTERVAL_MS, and logs each step it settles.
import { hostname } from "node:os";
import type { Logger } from "@switchyard/platform/logger.js";
import type { OrdersStore } from "../store/port.js";
import type { MoneySteps } from "./money-steps.js";

const LEASE = "orders.reconciler";
/** Steps settled per pass at most; the next pass takes the rest. */
const BATCH = 100;

export interface ReconcilerOptions {
  store: OrdersStore;
  steps: MoneySteps;
  logger: Logger;
  intervalMs: number;
  /**
   * Who holds the lease: stable for a replica (its host and port), so a replica restarted in place
   * takes its lease back at once instead of waiting for it to run out.
   */
  holder?: string;
}

export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = false;
  private readonly holder: string;

  constructor(private readonly options: ReconcilerOptions) {
    this.holder = options.holder ?? `${hostname()}:${process.pid}`;
  }

  /** One pass now, then one every interval. */
  start(): void {
    const tick = () => {
      void this.runOnce();
      if (!this.stopped) this.timer = setTimeout(tick, this.options.intervalMs).unref();
    };
    tick();
  }

  /** One pass: the number of steps settled (0 when another replica holds the lease). Never throws. */
  runOnce(): Promise<number> {
    this.running ??= this.pass()
      .catch((err: unknown) => {
        this.options.logger.warn({ message: String(err) }, "order reconciliation pass failed; the next one retries");
        return 0;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async pass(): Promise<number> {
    const { store, steps, logger, intervalMs } = this.options;
    // The lease outlives two missed passes, so a holder that died is replaced soon; it is renewed
    // before every step, so a long pass (payments slow) keeps it — or stops once another took it.
    const lease = () => store.takeLease(LEASE, this.holder, intervalMs * 2 + 1_000);
    if (!(await lease())) return 0;
    let settled = 0;
    for (const step of await store.dueSteps(BATCH)) {
      if (this.stopped || !(await lease())) break;
      try {
        await steps.resolve(step);
        settled++;
      } catch (err) {
        logger.warn(
          { orderId: step.orderId.toString(), step: step.kind, attempt: step.attempt, message: String(err) },
          "could not settle an order's money step yet",
        );
      }
    }
    return settled;
  }

  /** Stops the timer, lets a pass in progress end, and hands the lease back. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await this.options.store.releaseLease(LEASE, this.holder).catch(() => {});
  }
}

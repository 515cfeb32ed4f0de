// Status changes of orders for the TrackOrders streams of this replica: one LISTEN on the store's
// announcements (a trigger sends them at commit), fanned out in process. A change made on any replica
// reaches every subscriber.
import { EventEmitter } from "node:events";
import type { OrdersStore, OrderStatusChange } from "./store/port.js";

export type { OrderStatusChange };

export class OrderEvents {
  private readonly emitter = new EventEmitter();
  private stopWatching: (() => Promise<void>) | undefined;

  constructor(private readonly store: Pick<OrdersStore, "watchStatusChanges">) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    this.stopWatching = await this.store.watchStatusChanges((change) => this.emitter.emit("change", change));
  }

  /** Returns the unsubscribe function. */
  subscribe(listener: (change: OrderStatusChange) => void): () => void {
    this.emitter.on("change", listener);
    return () => this.emitter.off("change", listener);
  }

  listenerCount(): number {
    return this.emitter.listenerCount("change");
  }

  async stop(): Promise<void> {
    await this.stopWatching?.();
  }
}

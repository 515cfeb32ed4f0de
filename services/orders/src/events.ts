// Status changes of orders for the TrackOrders streams of this replica: one LISTEN on the store's
// announcements (a trigger sends them at commit), fanned out in process. A change made on any replica
// reaches every subscriber. When announcements may have been lost (the store's connection broke),
// subscribers are told to read what they follow again (`onResync`).
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
    this.stopWatching = await this.store.watchStatusChanges(
      (change) => this.emitter.emit("change", change),
      () => this.emitter.emit("resync"),
    );
  }

  /** Returns the unsubscribe function. `onResync`: changes may have gone unannounced; read again what is followed. */
  subscribe(listener: (change: OrderStatusChange) => void, onResync?: () => void): () => void {
    this.emitter.on("change", listener);
    if (onResync) this.emitter.on("resync", onResync);
    return () => {
      this.emitter.off("change", listener);
      if (onResync) this.emitter.off("resync", onResync);
    };
  }

  listenerCount(): number {
    return this.emitter.listenerCount("change");
  }

  async stop(): Promise<void> {
    await this.stopWatching?.();
  }
}

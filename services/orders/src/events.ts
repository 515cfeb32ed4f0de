// Status changes of orders, for TrackOrders subscribers in this process.
import { EventEmitter } from "node:events";
import type { OrderStatus } from "./domain/state-machine.js";

export interface OrderStatusChange {
  tenantId: string;
  orderId: bigint;
  status: OrderStatus;
  updatedAt: Date;
}

export class OrderEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  publish(change: OrderStatusChange): void {
    this.emitter.emit("change", change);
  }

  /** Returns the unsubscribe function. */
  subscribe(listener: (change: OrderStatusChange) => void): () => void {
    this.emitter.on("change", listener);
    return () => this.emitter.off("change", listener);
  }

  listenerCount(): number {
    return this.emitter.listenerCount("change");
  }
}

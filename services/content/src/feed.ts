// The live posts feed of this replica: one LISTEN on the store's channel, fanned out in process to
// the WatchPosts streams of each tenant. Posts made on any replica reach every subscriber.
import { EventEmitter } from "node:events";
import type { Logger } from "@switchyard/platform/logger.js";
import type { ContentStore, PostRecord } from "./store/port.js";

export class PostFeed {
  private readonly emitter = new EventEmitter();
  private stopListening: (() => Promise<void>) | undefined;
  private announcing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: ContentStore,
    private readonly logger: Logger,
  ) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    this.stopListening = await this.store.watchNewPosts((tenantId, postId) => {
      if (this.emitter.listenerCount(tenantId) === 0) return;
      // Announcements arrive in commit order, which is the feed's order: read and pass them on one
      // after another, so that no post overtakes one announced before it.
      this.announcing = this.announcing
        .then(() => this.store.getPost(tenantId, postId))
        .then(
          (post) => post && this.emitter.emit(tenantId, post),
          (err: unknown) => this.logger.warn({ message: String(err) }, "could not read an announced post"),
        );
    });
  }

  /** Returns the unsubscribe function. */
  subscribe(tenantId: string, listener: (post: PostRecord) => void): () => void {
    this.emitter.on(tenantId, listener);
    return () => this.emitter.off(tenantId, listener);
  }

  subscriberCount(): number {
    return this.emitter.eventNames().reduce((n, name) => n + this.emitter.listenerCount(name), 0);
  }

  async stop(): Promise<void> {
    await this.stopListening?.();
  }
}

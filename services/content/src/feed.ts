// The live posts feed of this replica: one LISTEN on the store's channel, fanned out in process to
// the WatchPosts streams of each tenant. Posts made on any replica reach every subscriber. When
// announcements may have been lost (the store's connection broke and was made again), the feed reads
// each followed tenant's posts after the newest it passed on, so its watchers miss none.
import { EventEmitter } from "node:events";
import type { Logger } from "@switchyard/platform/logger.js";
import { untilDone } from "@switchyard/platform/until-done.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { PostRecord, PostStore } from "./store/posts/port.js";

/** Posts read at a time when the feed catches up after lost announcements. */
const CATCH_UP_PAGE = 200;
/** Where a tenant with no post at all starts: before every post. */
const BEGINNING: Keyset = { createdAt: new Date(0), id: "" };

const isAfter = (p: Keyset, k: Keyset) =>
  p.createdAt.getTime() > k.createdAt.getTime() || (p.createdAt.getTime() === k.createdAt.getTime() && p.id > k.id);

export class PostFeed {
  private readonly emitter = new EventEmitter();
  private stopListening: (() => Promise<void>) | undefined;
  private stopped = false;
  private announcing: Promise<unknown> = Promise.resolve();
  /**
   * For each tenant followed here: the newest post passed on, or the tenant's newest when its first
   * watcher came (read then, in the background). After lost announcements, the feed reads from there.
   */
  private readonly newest = new Map<string, Promise<Keyset>>();

  constructor(
    private readonly store: PostStore,
    private readonly logger: Logger,
  ) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    this.stopListening = await this.store.watchNewPosts(
      (tenantId, postId) => {
        if (this.emitter.listenerCount(tenantId) === 0) return;
        // Announcements arrive in commit order, which is the feed's order: read and pass them on one
        // after another, so that no post overtakes one announced before it.
        // Until the read succeeds: a post announced while the store does not answer (its connection
        // just broke) is still passed on, in its turn.
        this.inTurn(
          () =>
            untilDone(
              async () => {
                const post = await this.store.getPost(tenantId, postId);
                if (post) this.pass(post);
              },
              { logger: this.logger, what: "read an announced post", stopped: () => this.stopped },
            ),
          "could not read an announced post",
        );
      },
      // In turn too, and until it succeeds (the store may not answer yet): announcements that follow wait for it.
      () =>
        this.inTurn(
          () =>
            untilDone(() => this.catchUp(), {
              logger: this.logger,
              what: "read the posts made while announcements were lost",
              stopped: () => this.stopped,
            }),
          "could not read the posts made while announcements were lost",
        ),
    );
  }

  /** Returns the unsubscribe function. */
  subscribe(tenantId: string, listener: (post: PostRecord) => void): () => void {
    if (!this.newest.has(tenantId)) this.newest.set(tenantId, this.newestOf(tenantId));
    this.emitter.on(tenantId, listener);
    return () => {
      this.emitter.off(tenantId, listener);
      if (this.emitter.listenerCount(tenantId) === 0) this.newest.delete(tenantId);
    };
  }

  subscriberCount(): number {
    return this.emitter.eventNames().reduce((n, name) => n + this.emitter.listenerCount(name), 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.stopListening?.();
  }

  private inTurn(work: () => Promise<void>, failure: string): void {
    this.announcing = this.announcing
      .then(work)
      .catch((err: unknown) => this.logger.warn({ message: String(err) }, failure));
  }

  private pass(post: PostRecord): void {
    const position = { createdAt: post.createdAt, id: post.id };
    const known = this.newest.get(post.tenantId);
    if (known)
      this.newest.set(
        post.tenantId,
        known.then((k) => (isAfter(position, k) ? position : k)),
      );
    this.emitter.emit(post.tenantId, post);
  }

  /** The tenant's newest post now; a read that fails starts from its first post (a watcher dedupes what it has). */
  private newestOf(tenantId: string): Promise<Keyset> {
    return this.store.newestPostPosition(tenantId).then(
      (position) => position ?? BEGINNING,
      () => BEGINNING,
    );
  }

  /** Passes on every post of a followed tenant made after the newest passed on. */
  private async catchUp(): Promise<void> {
    let caught = 0;
    for (const tenantId of [...this.newest.keys()]) {
      let from = await this.newest.get(tenantId);
      while (from && this.emitter.listenerCount(tenantId) > 0) {
        const missed = await this.store.listPostsAfter(tenantId, from, CATCH_UP_PAGE);
        for (const post of missed) this.pass(post);
        caught += missed.length;
        if (missed.length < CATCH_UP_PAGE) break;
        from = { createdAt: missed.at(-1)!.createdAt, id: missed.at(-1)!.id };
      }
    }
    this.logger.info({ posts: caught }, "the live feed read what was made while its announcements were lost");
  }
}

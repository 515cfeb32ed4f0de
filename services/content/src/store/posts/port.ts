// A tenant's posts in content's storage: the feed, newest first in keyset pages, and announced to
// every replica as they are made (the live feed).
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

export interface PostRecord {
  id: string;
  tenantId: string;
  authorId: bigint;
  title: string;
  body: string;
  createdAt: Date;
}

export interface PostStore {
  /** Inserts the post and announces it on the store's notification channel in the same transaction. */
  createPost(
    tenantId: string,
    authorId: bigint,
    post: { title: string; body: string },
    call?: CallScope,
  ): Promise<PostRecord>;
  getPost(tenantId: string, id: string): Promise<PostRecord | undefined>;
  /** Newest first, before the keyset position. */
  listPosts(tenantId: string, before: Keyset | undefined, limit: number): Promise<PostRecord[]>;
  /** Oldest first, after the keyset position (a watch resuming where it stopped). */
  listPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<PostRecord[]>;
  /** How many posts come after the keyset position, counting no further than `limit`. */
  countPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<number>;
  /** The position of the tenant's newest post; undefined when it has none. */
  newestPostPosition(tenantId: string): Promise<Keyset | undefined>;
  /**
   * Calls `onPost` for every post created by any replica on this database, and `onResync` when some
   * may have gone unannounced (the store's connection was lost); resolves to the stop function.
   */
  watchNewPosts(onPost: (tenantId: string, postId: string) => void, onResync: () => void): Promise<() => Promise<void>>;
}

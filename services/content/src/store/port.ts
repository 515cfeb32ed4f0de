// What the content service needs from storage.
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CatalogItemInput } from "../domain/content.js";

export interface DocumentRecord {
  id: string;
  tenantId: string;
  title: string;
  body: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface PostRecord {
  id: string;
  tenantId: string;
  authorId: bigint;
  title: string;
  body: string;
  createdAt: Date;
}

export interface CatalogItemRecord extends CatalogItemInput {
  updatedAt: Date;
}

export interface ContentStore {
  createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord>;
  getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined>;
  /** The conditional write: applied only while the stored version is `expectedVersion` (any version when undefined). */
  updateDocument(tenantId: string, id: string, doc: { title: string; body: string }, expectedVersion: number | undefined): Promise<DocumentRecord | undefined>;
  /** Inserts the post and announces it on the store's notification channel in the same transaction. */
  createPost(tenantId: string, authorId: bigint, post: { title: string; body: string }): Promise<PostRecord>;
  getPost(tenantId: string, id: string): Promise<PostRecord | undefined>;
  /** Newest first, before the keyset position. */
  listPosts(tenantId: string, before: Keyset | undefined, limit: number): Promise<PostRecord[]>;
  /** Oldest first, after the keyset position (a watch resuming where it stopped). */
  listPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<PostRecord[]>;
  /** How many posts come after the keyset position, counting no further than `limit`. */
  countPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<number>;
  /** Calls `onPost` for every post created by any replica on this database; resolves to the stop function. */
  watchNewPosts(onPost: (tenantId: string, postId: string) => void): Promise<() => Promise<void>>;
  listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }>;
  /** The catalog items with these skus (any order; skus not in the catalog are absent). */
  getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]>;
  /** Creates or replaces by sku; true when it was created. */
  upsertCatalogItem(item: CatalogItemInput): Promise<boolean>;
}

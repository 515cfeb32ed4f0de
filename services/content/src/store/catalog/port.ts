// The global catalog in content's storage: items by sku, read by anyone, written by the catalog's
// owner (ImportItems, import jobs).
import type { CatalogItemInput } from "../../domain/content.js";
import type { CatalogWriter } from "../../catalog-import.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

export interface CatalogItemRecord extends CatalogItemInput {
  updatedAt: Date;
}

export interface CatalogStore extends CatalogWriter {
  listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }>;
  /** The catalog items with these skus (any order; skus not in the catalog are absent). */
  getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]>;
  /** Creates or replaces by sku, recording a cache change with it; true when it was created. */
  upsertCatalogItem(item: CatalogItemInput, call?: CallScope): Promise<boolean>;
}

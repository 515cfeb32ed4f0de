// CatalogStore on the PostgreSQL-family adapter. Every write of an item records a cache change in
// its transaction (the edge caches then drop their catalog pages).
import type { SqlDatabase, SqlExecutor } from "@switchyard/platform/store";
import type { CatalogItemInput } from "../../domain/content.js";
import { CATALOG_CHANGE, type CacheChangeRecorder } from "../cache-log/sql-store.js";
import { NOW } from "../sql-clock.js";
import type { CatalogItemRecord, CatalogStore } from "./port.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

interface CatalogItemRow {
  sku: string;
  name: string;
  price: bigint;
  currency: string;
  updated_at: Date;
}

const CATALOG_ITEM_COLUMNS = "sku, name, price, currency, updated_at";

const toCatalogItem = (r: CatalogItemRow): CatalogItemRecord => ({
  sku: r.sku,
  name: r.name,
  price: r.price,
  currency: r.currency,
  updatedAt: r.updated_at,
});

/** Creates or replaces an item by sku within the caller's transaction; true when it was created. */
export async function upsertCatalogItemIn(tx: SqlExecutor, item: CatalogItemInput): Promise<boolean> {
  const { rows } = await tx.query<{ created: boolean }>(
    `INSERT INTO catalog_items (sku, name, price, currency) VALUES ($1, $2, $3, $4)
     ON CONFLICT (sku) DO UPDATE SET name = EXCLUDED.name, price = EXCLUDED.price, currency = EXCLUDED.currency, updated_at = ${NOW}
     RETURNING (xmax = 0) AS created`,
    [item.sku, item.name.trim(), item.price, item.currency],
  );
  return rows[0]!.created;
}

export class SqlCatalogStore implements CatalogStore {
  constructor(
    private readonly db: SqlDatabase,
    private readonly cacheLog: CacheChangeRecorder,
  ) {}

  async listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }> {
    const page = await this.db.query<CatalogItemRow>(
      `SELECT ${CATALOG_ITEM_COLUMNS} FROM catalog_items ORDER BY sku LIMIT $1 OFFSET $2`,
      [limit, offset],
    );
    const count = await this.db.query<{ n: bigint }>(`SELECT count(*)::bigint AS n FROM catalog_items`);
    return { items: page.rows.map(toCatalogItem), total: Number(count.rows[0]?.n ?? 0n) };
  }

  async getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]> {
    if (skus.length === 0) return [];
    const { rows } = await this.db.query<CatalogItemRow>(
      `SELECT ${CATALOG_ITEM_COLUMNS} FROM catalog_items WHERE sku = ANY($1::text[])`,
      [skus],
    );
    return rows.map(toCatalogItem);
  }

  upsertCatalogItem(item: CatalogItemInput, call?: CallScope): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const created = await upsertCatalogItemIn(tx, item);
      await this.cacheLog.record(tx, CATALOG_CHANGE);
      return created;
    }, call);
  }
}

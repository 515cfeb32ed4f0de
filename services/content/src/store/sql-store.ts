// Content's stores on the PostgreSQL-family adapter, all on the service's one database. The writers
// of cached data (documents, the catalog, import jobs) record each change in the cache log within
// their own transaction.
import type { SqlDatabase } from "@switchyard/platform/store";
import { SqlCacheLogStore } from "./cache-log/sql-store.js";
import { SqlCatalogStore } from "./catalog/sql-store.js";
import { SqlDocumentStore } from "./documents/sql-store.js";
import { SqlImportJobStore } from "./import-jobs/sql-store.js";
import { SqlPostStore } from "./posts/sql-store.js";
import type { ContentStores } from "./port.js";

export function sqlContentStores(db: SqlDatabase): ContentStores {
  const cacheLog = new SqlCacheLogStore(db);
  return {
    documents: new SqlDocumentStore(db, cacheLog),
    posts: new SqlPostStore(db),
    catalog: new SqlCatalogStore(db, cacheLog),
    cacheLog,
    importJobs: new SqlImportJobStore(db, cacheLog),
  };
}

// What the content service needs from storage, one store per aggregate: documents, posts, the
// catalog, the edge caches' change log and leases, and import jobs.
import type { CacheLogStore } from "./cache-log/port.js";
import type { CatalogStore } from "./catalog/port.js";
import type { DocumentStore } from "./documents/port.js";
import type { ImportJobStore } from "./import-jobs/port.js";
import type { PostStore } from "./posts/port.js";

export interface ContentStores {
  documents: DocumentStore;
  posts: PostStore;
  catalog: CatalogStore;
  cacheLog: CacheLogStore;
  importJobs: ImportJobStore;
}

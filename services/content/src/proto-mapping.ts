// Internal records → proto messages, field by field.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CacheChangeKind,
  CacheChangeSchema,
  CatalogItemSchema,
  DocumentSchema,
  ImportJobSchema,
  ImportJobStatus,
  PostSchema,
  type CacheChange,
  type CatalogItem,
  type Document,
  type ImportJob,
  type Post,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { encodeCursor } from "@switchyard/platform/paging.js";
import { entityTag } from "./domain/content.js";
import type { CacheChangeRecord } from "./store/cache-log/port.js";
import type { CatalogItemRecord } from "./store/catalog/port.js";
import type { DocumentRecord } from "./store/documents/port.js";
import type { ImportJobRecord } from "./store/import-jobs/port.js";
import type { PostRecord } from "./store/posts/port.js";

export const postsCollection = (tenantId: string) => `posts:${tenantId}`;
export const postKeyset = (p: PostRecord) => ({ createdAt: p.createdAt, id: p.id });

export function documentToProto(d: DocumentRecord): Document {
  return create(DocumentSchema, {
    id: d.id,
    title: d.title,
    body: d.body,
    etag: entityTag(d.id, d.version),
    createTime: timestampFromDate(d.createdAt),
    updateTime: timestampFromDate(d.updatedAt),
  });
}

export function postToProto(p: PostRecord): Post {
  return create(PostSchema, {
    id: p.id,
    title: p.title,
    body: p.body,
    authorId: p.authorId,
    createTime: timestampFromDate(p.createdAt),
    cursor: encodeCursor(postsCollection(p.tenantId), postKeyset(p)),
  });
}

/**
 * A post's encoded size, never below it: its text in UTF-8 (a character takes up to 3 bytes) and
 * room for its id, author, time and cursor (~250 bytes with the longest tenant id).
 */
export const postBytes = (p: PostRecord): number => Buffer.byteLength(p.title) + Buffer.byteLength(p.body) + 512;

export function catalogItemToProto(i: CatalogItemRecord): CatalogItem {
  return create(CatalogItemSchema, {
    sku: i.sku,
    name: i.name,
    price: i.price,
    currency: i.currency,
    updateTime: timestampFromDate(i.updatedAt),
  });
}

const JOB_STATUS = {
  queued: ImportJobStatus.QUEUED,
  running: ImportJobStatus.RUNNING,
  succeeded: ImportJobStatus.SUCCEEDED,
  failed: ImportJobStatus.FAILED,
} as const;

export function importJobToProto(j: ImportJobRecord): ImportJob {
  return create(ImportJobSchema, {
    id: j.id,
    status: JOB_STATUS[j.status],
    received: j.received,
    imported: j.imported,
    failed: j.failed,
    errors: j.errors.map((e) => ({ line: e.line, code: e.code, message: e.message })),
    createTime: timestampFromDate(j.createdAt),
    updateTime: timestampFromDate(j.updatedAt),
    failureMessage: j.failureMessage ?? "",
  });
}

const CHANGE_KIND = { catalog: CacheChangeKind.CATALOG, document: CacheChangeKind.DOCUMENT } as const;

export function cacheChangeToProto(c: CacheChangeRecord): CacheChange {
  return create(CacheChangeSchema, { position: c.position, kind: CHANGE_KIND[c.kind], tenantId: c.tenantId, id: c.id });
}

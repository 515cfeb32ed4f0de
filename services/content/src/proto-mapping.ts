// Internal records → proto messages, field by field.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { CatalogItemSchema, DocumentSchema, PostSchema, type CatalogItem, type Document, type Post } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { encodeCursor } from "@switchyard/platform/paging.js";
import { entityTag } from "./domain/content.js";
import type { CatalogItemRecord, DocumentRecord, PostRecord } from "./store/port.js";

export const postsCollection = (tenantId: string) => `posts:${tenantId}`;
export const postKeyset = (p: PostRecord) => ({ createdAt: p.createdAt, id: p.id });

export function documentToProto(d: DocumentRecord): Document {
  return create(DocumentSchema, { id: d.id, title: d.title, body: d.body, etag: entityTag(d.id, d.version), createTime: timestampFromDate(d.createdAt), updateTime: timestampFromDate(d.updatedAt) });
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

export function catalogItemToProto(i: CatalogItemRecord): CatalogItem {
  return create(CatalogItemSchema, { sku: i.sku, name: i.name, price: i.price, currency: i.currency, updateTime: timestampFromDate(i.updatedAt) });
}

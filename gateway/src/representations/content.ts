// Public representations of documents, posts and catalog items.
import {
  ImportJobStatus,
  type CatalogItem,
  type Document,
  type ImportJob,
  type Post,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { isoTime } from "@switchyard/platform/representations/time.js";

/** The entity tag travels in the ETag header, not in the body. */
export function documentJson(d: Document) {
  return {
    id: d.id,
    title: d.title,
    body: d.body,
    created_at: isoTime(d.createTime),
    updated_at: isoTime(d.updateTime),
  };
}

export function postJson(p: Post) {
  return { id: p.id, title: p.title, body: p.body, author_id: Number(p.authorId), created_at: isoTime(p.createTime) };
}

export function catalogItemJson(i: CatalogItem) {
  return { sku: i.sku, name: i.name, price: Number(i.price), currency: i.currency, updated_at: isoTime(i.updateTime) };
}

const JOB_STATUS: Partial<Record<ImportJobStatus, string>> = {
  [ImportJobStatus.QUEUED]: "queued",
  [ImportJobStatus.RUNNING]: "running",
  [ImportJobStatus.SUCCEEDED]: "succeeded",
  [ImportJobStatus.FAILED]: "failed",
};

export function importJobJson(j: ImportJob) {
  return {
    id: j.id,
    status: JOB_STATUS[j.status] ?? "queued",
    counts: { received: j.received, imported: j.imported, failed: j.failed },
    errors: j.errors.map((e) => ({ line: e.line, code: e.code, message: e.message })),
    failure: j.failureMessage === "" ? null : j.failureMessage,
    created_at: isoTime(j.createTime),
    updated_at: isoTime(j.updateTime),
  };
}

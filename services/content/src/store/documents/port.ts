import type { CallScope } from "@switchyard/platform/call-deadline.js";
// A tenant's documents in content's storage: written with entity tags (a conditional write on the
// stored version), each write recorded for the edge caches.

export interface DocumentRecord {
  id: string;
  tenantId: string;
  title: string;
  body: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A write's condition — the version it expects (undefined: any) — and the call it is made for, if any (its deadline bounds the transaction). */
export interface ConditionalWrite {
  expectedVersion: number | undefined;
  call?: CallScope | undefined;
}

export interface DocumentStore {
  createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord>;
  getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined>;
  /** The conditional write: applied only while the stored version is `expectedVersion` (any version when undefined). Records a cache change with it. */
  updateDocument(
    tenantId: string,
    id: string,
    doc: { title: string; body: string },
    write: ConditionalWrite,
  ): Promise<DocumentRecord | undefined>;
}

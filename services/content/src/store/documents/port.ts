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

export interface DocumentStore {
  createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord>;
  getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined>;
  /** The conditional write: applied only while the stored version is `expectedVersion` (any version when undefined). Records a cache change with it. */
  updateDocument(
    tenantId: string,
    id: string,
    doc: { title: string; body: string },
    expectedVersion: number | undefined,
  ): Promise<DocumentRecord | undefined>;
}

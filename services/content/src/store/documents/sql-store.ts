// DocumentStore on the PostgreSQL-family adapter. Updates are conditional writes on the stored
// version, each recording a cache change in its transaction.
import type { SqlDatabase } from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { CacheChangeRecorder } from "../cache-log/sql-store.js";
import type { ConditionalWrite, DocumentRecord, DocumentStore } from "./port.js";

const DOC_COLUMNS = "id, tenant_id, title, body, version, created_at, updated_at";

interface DocRow {
  id: string;
  tenant_id: string;
  title: string;
  body: string;
  version: number;
  created_at: Date;
  updated_at: Date;
}

const toDoc = (r: DocRow): DocumentRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  title: r.title,
  body: r.body,
  version: r.version,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export class SqlDocumentStore implements DocumentStore {
  constructor(
    private readonly db: SqlDatabase,
    private readonly cacheLog: CacheChangeRecorder,
  ) {}

  async createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord> {
    const { rows } = await this.db.query<DocRow>(
      `INSERT INTO documents (id, tenant_id, title, body) VALUES ($1, $2, $3, $4) RETURNING ${DOC_COLUMNS}`,
      [newId("doc"), tenantId, doc.title, doc.body],
    );
    return toDoc(rows[0]!);
  }

  async getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined> {
    const { rows } = await this.db.query<DocRow>(
      `SELECT ${DOC_COLUMNS} FROM documents WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    return rows[0] && toDoc(rows[0]);
  }

  updateDocument(
    tenantId: string,
    id: string,
    doc: { title: string; body: string },
    { expectedVersion, call }: ConditionalWrite,
  ): Promise<DocumentRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<DocRow>(
        `UPDATE documents SET title = $3, body = $4, version = version + 1, updated_at = date_trunc('milliseconds', clock_timestamp())
         WHERE id = $1 AND tenant_id = $2 AND ($5::integer IS NULL OR version = $5)
         RETURNING ${DOC_COLUMNS}`,
        [id, tenantId, doc.title, doc.body, expectedVersion ?? null],
      );
      if (!rows[0]) return undefined;
      await this.cacheLog.record(tx, { kind: "document", tenantId, id });
      return toDoc(rows[0]);
    }, call);
  }
}

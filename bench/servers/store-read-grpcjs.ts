// The same-work reference's upstream (issue 15): a grpc-js server (our bootstrap) whose unary Echo
// does exactly the store read the real path does — payments' getPayment or content's getDocument —
// on the same engine through the same adapter (PGlite's prepared statements in DATA_DIR, or pg on
// DATABASE_URL in schema DB_SCHEMA), and answers the record's id. Behind bare-hop.ts it is
// node:http → grpc-js → one store read, and nothing else: no auth, validation or representation.
// With ANSWER=record it answers the whole record instead, as the real service's GetPayment or
// GetDocument message (the services' own proto mapping, entity tag included), for bare-hop.ts to
// represent as the gateway does: the same read and the same payload, still with no policy.
import { createLogger } from "@switchyard/platform/logger.js";
import type { ServiceImpl } from "@connectrpc/connect";
import { EchoService, echoImpl } from "@switchyard/platform/echo.js";
import { registration, startGrpcServer, type ServiceRegistration } from "@switchyard/platform/server.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { paymentToProto } from "@switchyard/payments/proto-mapping.js";
import { documentToProto } from "@switchyard/content/proto-mapping.js";
import { openSqlDatabase } from "@switchyard/platform/store";
import { paymentsMigrations } from "@switchyard/payments/store/migrations.js";
import { SqlPaymentsStore } from "@switchyard/payments/store/sql-store.js";
import { contentMigrations } from "@switchyard/content/store/migrations.js";
import { SqlContentStore } from "@switchyard/content/store/sql-store.js";
import { serve } from "./child.js";

const TENANT = "bench";

/** Opens the store, makes one record and returns the read of it, answered as an id or as the record. */
async function storeRead(kind: string, where: { dataDir: string; databaseUrl?: string; schema: string }): Promise<{ read(): Promise<string>; recordService: ServiceRegistration; close(): Promise<void> }> {
  const options = { dataDir: where.dataDir, schema: where.schema, ...(where.databaseUrl ? { databaseUrl: where.databaseUrl } : {}) };
  if (kind === "payment") {
    const db = await openSqlDatabase({ ...options, migrations: paymentsMigrations });
    const store = new SqlPaymentsStore(db);
    const { result } = await store.createPayment(TENANT, { principal: "user:1", key: crypto.randomUUID(), requestHash: "bench" }, { amount: 1250n, currency: "EUR", source: "tok_visa", ownerUserId: 1n, reference: "" });
    return {
      read: async () => (await store.getPayment(TENANT, result.id))!.id,
      recordService: registration(PaymentService, { getPayment: async () => ({ payment: paymentToProto((await store.getPayment(TENANT, result.id))!) }) } as Partial<ServiceImpl<typeof PaymentService>> as ServiceImpl<typeof PaymentService>),
      close: () => db.close(),
    };
  }
  if (kind === "document") {
    const db = await openSqlDatabase({ ...options, migrations: contentMigrations });
    const store = new SqlContentStore(db);
    const doc = await store.createDocument(TENANT, { title: "Bench", body: "a document read under load" });
    return {
      read: async () => (await store.getDocument(TENANT, doc.id))!.id,
      recordService: registration(ContentService, { getDocument: async () => ({ document: documentToProto((await store.getDocument(TENANT, doc.id))!) }) } as Partial<ServiceImpl<typeof ContentService>> as ServiceImpl<typeof ContentService>),
      close: () => db.close(),
    };
  }
  throw new Error(`READ must be payment or document, not ${kind}`);
}

serve("store-read-grpcjs", async () => {
  const dataDir = process.env.DATA_DIR;
  const schema = process.env.DB_SCHEMA;
  if (!dataDir || !schema) throw new Error("DATA_DIR and DB_SCHEMA are required");
  const store = await storeRead(process.env.READ ?? "payment", { dataDir, schema, ...(process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : {}) });
  const server = await startGrpcServer({
    name: "bench-store-read",
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("bench-store-read", "warn"),
    drainTimeoutMs: 1_000,
    services: [process.env.ANSWER === "record" ? store.recordService : registration(EchoService, { ...echoImpl(), echo: async () => ({ message: await store.read() }) })],
  });
  return {
    port: server.port,
    async stop() {
      await server.shutdown();
      await store.close();
    },
  };
});

// The rows the same-work reference reads, made by the services' own migrations and stores — so the
// tables, their indexes and the rows are the mesh's — in a process of its own that exits before any
// load (the reference's processes import nothing of the project; the load generator never loads
// PGlite). One payment and one document of tenant TENANT, as the mesh fixture makes them, in
// PAYMENTS_SCHEMA and CONTENT_SCHEMA of DATABASE_URL or of the PGlite cluster in DATA_DIR. Prints
// their ids as one JSON line.
import { randomUUID } from "node:crypto";
import { openSqlDatabase } from "@switchyard/platform/store";
import { paymentsMigrations } from "@switchyard/payments/store/migrations.js";
import { SqlPaymentsStore } from "@switchyard/payments/store/sql-store.js";
import { contentMigrations } from "@switchyard/content/store/migrations.js";
import { sqlContentStores } from "@switchyard/content/store/sql-store.js";

const {
  DATABASE_URL: databaseUrl,
  DATA_DIR: dataDir,
  TENANT: tenant,
  PAYMENTS_SCHEMA: paymentsSchema,
  CONTENT_SCHEMA: contentSchema,
} = process.env;
if (!tenant || !paymentsSchema || !contentSchema || (!databaseUrl && !dataDir))
  throw new Error("TENANT, PAYMENTS_SCHEMA, CONTENT_SCHEMA and DATABASE_URL or DATA_DIR are required");
const where = { ...(databaseUrl ? { databaseUrl } : { dataDir }) };

// One engine at a time: an embedded cluster is opened by one PGlite instance only.
const payments = await openSqlDatabase({ ...where, schema: paymentsSchema, migrations: paymentsMigrations });
const payment = await new SqlPaymentsStore(payments)
  .createPayment(
    tenant,
    { principal: "user:1", key: randomUUID(), requestHash: "bench" },
    { amount: 1250n, currency: "EUR", source: "tok_visa", ownerUserId: 1n, reference: "" },
  )
  .finally(() => payments.close());
const content = await openSqlDatabase({ ...where, schema: contentSchema, migrations: contentMigrations });
const document = await sqlContentStores(content)
  .documents.createDocument(tenant, { title: "Bench", body: "a document read under load" })
  .finally(() => content.close());
process.stdout.write(`${JSON.stringify({ paymentId: payment.result.id, documentId: document.id })}\n`);

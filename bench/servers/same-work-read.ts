// The same-work reference's upstream (issue 34): a @grpc/grpc-js server, on the library's defaults,
// whose every call is one read by id and tenant through a named prepared statement — the SQL
// payments' and content's stores run for getPayment and getDocument — on the engine the mesh runs:
// a PostgreSQL server through `pg` (DATABASE_URL), or embedded PGlite (DATA_DIR, with the mesh's
// engine settings in PGLITE_SETTINGS). Each row is decoded as its library decodes it; a document's
// entity tag is computed as content computes it, with node:crypto. R answers the id, R+ the record.
// Libraries only: the rows were made beforehand by the services' own migrations and stores
// (bench/same-work-data.ts), and this process imports nothing of the project.
import { hash } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import pg from "pg";
import { PGlite, protocol } from "@electric-sql/pglite";
import { serve } from "./child.js";
import { READS, type DocumentRow, type IdReply, type PaymentRow, type ReadRequest } from "./same-work-rpc.js";

// Word for word what SqlPaymentsStore.getPayment and SqlDocumentStore.getDocument run.
const PAYMENT_BY_ID =
  "SELECT id, tenant_id, amount, currency, source, amount_refunded, owner_user_id, reference, created_at FROM payments WHERE id = $1 AND tenant_id = $2";
const DOCUMENT_BY_ID =
  "SELECT id, tenant_id, title, body, version, created_at, updated_at FROM documents WHERE id = $1 AND tenant_id = $2";

/** A row's columns in the statement's order, decoded by the driver. */
type Row = unknown[];

interface Reader {
  payment(id: string): Promise<Row | undefined>;
  document(id: string): Promise<Row | undefined>;
  close(): Promise<void>;
}

interface Where {
  tenant: string;
  paymentsSchema: string;
  contentSchema: string;
}

/** `pg`: a pool per service schema (as each service keeps its own), a named statement prepared once per connection. */
function serverReader(databaseUrl: string, where: Where): Reader {
  const pool = (schema: string) =>
    new pg.Pool({ connectionString: databaseUrl, max: 10, options: `-c search_path=${schema}` });
  const payments = pool(where.paymentsSchema);
  const content = pool(where.contentSchema);
  const read = (from: pg.Pool, name: string, text: string) => async (id: string) =>
    (await from.query({ name, text, values: [id, where.tenant], rowMode: "array" })).rows[0];
  return {
    payment: read(payments, "payment_by_id", PAYMENT_BY_ID),
    document: read(content, "document_by_id", DOCUMENT_BY_ID),
    close: async () => void (await Promise.all([payments.end(), content.end()])),
  };
}

/**
 * PGlite through its wire protocol: each statement parsed and described once under a name, each
 * read one bind + execute + sync. (PGlite's query() would parse, describe and decode generally on
 * every call — slower than the mesh's store adapter, and a reference must not be the slower side.)
 */
async function embeddedReader(dataDir: string, settings: string[], where: Where): Promise<Reader> {
  const db = new PGlite({
    dataDir,
    startParams: [...PGlite.defaultStartParams, ...settings.flatMap((s) => ["-c", s])],
  });
  await db.waitReady;
  await db.exec(`SET search_path TO ${where.paymentsSchema}, ${where.contentSchema}`);
  const exchange = async (messages: Uint8Array[]) => {
    const chunks: Uint8Array[] = [];
    // The engine hands out views into its own memory: each is copied before the next call reuses it.
    // No filesystem sync after it, as the mesh's store adapter: Node's filesystem, which PGlite opens
    // under a data directory, writes as it goes; its sync only takes a lock.
    await db.execProtocolRawStream(Buffer.concat(messages), {
      syncToFs: false,
      onRawData: (data) => chunks.push(data.slice()),
    });
    return replyOf(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  };
  const prepare = async (name: string, text: string) => {
    const { columnTypes } = await exchange([
      protocol.serialize.parse({ name, text }),
      protocol.serialize.describe({ type: "S", name }),
      protocol.serialize.sync(),
    ]);
    const parsers = columnTypes.map((type) => db.parsers[type]);
    return async (id: string): Promise<Row | undefined> => {
      const { rows } = await exchange([
        protocol.serialize.bind({ statement: name, values: [id, where.tenant] }),
        protocol.serialize.execute({}),
        protocol.serialize.sync(),
      ]);
      const fields = rows[0];
      return fields?.map((raw, i) => (raw === null ? null : parsers[i] ? parsers[i](raw, columnTypes[i]) : raw));
    };
  };
  return {
    payment: await prepare("payment_by_id", PAYMENT_BY_ID),
    document: await prepare("document_by_id", DOCUMENT_BY_ID),
    close: () => db.close(),
  };
}

const utf8 = new TextDecoder();

/** The data rows (raw text fields) and column types of one reply; an ErrorResponse throws. */
function replyOf(bytes: Uint8Array): { rows: (string | null)[][]; columnTypes: number[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const rows: (string | null)[][] = [];
  const columnTypes: number[] = [];
  for (let at = 0; at + 5 <= bytes.length;) {
    const code = bytes[at]!;
    const end = at + 1 + view.getInt32(at + 1);
    let p = at + 5;
    if (code === 0x44) {
      // DataRow: a count, then each field's length (-1: NULL) and text
      const fields: (string | null)[] = [];
      const count = view.getInt16(p);
      p += 2;
      for (let i = 0; i < count; i++) {
        const length = view.getInt32(p);
        p += 4;
        fields.push(length < 0 ? null : utf8.decode(bytes.subarray(p, p + length)));
        if (length > 0) p += length;
      }
      rows.push(fields);
    } else if (code === 0x54) {
      // RowDescription: per column its name, then table, column number, type, size, modifier, format
      const count = view.getInt16(p);
      p += 2;
      for (let i = 0; i < count; i++) {
        p = bytes.indexOf(0, p) + 1;
        columnTypes.push(view.getInt32(p + 6));
        p += 18;
      }
    } else if (code === 0x45) {
      // ErrorResponse: its M(essage) field
      const text = utf8.decode(bytes.subarray(p, end));
      throw new Error(/(?:^|\0)M([^\0]*)/.exec(text)?.[1] ?? "database error");
    }
    at = end;
  }
  return { rows, columnTypes };
}

/** As content's entityTag: the first 27 characters of SHA-256(id:version) in base64url, quoted. */
const entityTag = (id: unknown, version: unknown) =>
  `"${hash("sha256", `${String(id)}:${String(version)}`, "base64url").slice(0, 27)}"`;
const time = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value));

function paymentRow(r: Row): PaymentRow {
  return {
    id: String(r[0]),
    tenant_id: String(r[1]),
    amount: String(r[2]),
    currency: String(r[3]),
    source: String(r[4]),
    amount_refunded: String(r[5]),
    owner_user_id: String(r[6]),
    reference: String(r[7]),
    created_at: time(r[8]),
  };
}

function documentRow(r: Row): DocumentRow {
  return {
    id: String(r[0]),
    tenant_id: String(r[1]),
    title: String(r[2]),
    body: String(r[3]),
    version: Number(r[4]),
    created_at: time(r[5]),
    updated_at: time(r[6]),
    etag: entityTag(r[0], r[4]),
  };
}

function unary<R>(answer: (id: string) => Promise<R | undefined>): grpc.handleUnaryCall<ReadRequest, R> {
  return (call, callback) => {
    answer(call.request.id).then(
      (reply) =>
        reply === undefined
          ? callback({ code: grpc.status.NOT_FOUND, details: "no such record" })
          : callback(null, reply),
      (err: unknown) => callback({ code: grpc.status.INTERNAL, details: String(err) }),
    );
  };
}

serve("same-work-read", async () => {
  const {
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    TENANT: tenant,
    PAYMENTS_SCHEMA: paymentsSchema,
    CONTENT_SCHEMA: contentSchema,
  } = process.env;
  if (!tenant || !paymentsSchema || !contentSchema || (!databaseUrl && !dataDir))
    throw new Error("TENANT, PAYMENTS_SCHEMA, CONTENT_SCHEMA and DATABASE_URL or DATA_DIR are required");
  const where = { tenant, paymentsSchema, contentSchema };
  const settings = (process.env.PGLITE_SETTINGS ?? "").split(" ").filter(Boolean);
  const reader = databaseUrl ? serverReader(databaseUrl, where) : await embeddedReader(dataDir!, settings, where);
  const server = new grpc.Server();
  server.addService(READS, {
    payment: unary<IdReply>(async (id) => {
      const row = await reader.payment(id);
      return row && { id: String(row[0]) };
    }),
    paymentRecord: unary<PaymentRow>(async (id) => {
      const row = await reader.payment(id);
      return row && paymentRow(row);
    }),
    document: unary<IdReply>(async (id) => {
      const row = await reader.document(id);
      return row && { id: String(row[0]), etag: entityTag(row[0], row[4]) };
    }),
    documentRecord: unary<DocumentRow>(async (id) => {
      const row = await reader.document(id);
      return row && documentRow(row);
    }),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
  return {
    port,
    async stop() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      await reader.close();
    },
  };
});

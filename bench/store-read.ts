// What one store read costs on this machine, on its own: the payments store's getPayment on the
// engine the mesh runs (embedded PGlite with a data directory), in this process, one at a time.
// The read path makes exactly one such read per request, so its CPU time is work the bare hop
// never does: added to the hop's CPU per request it bounds how close the read path can come.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqlDatabase } from "@switchyard/platform/store";
import { paymentsMigrations } from "@switchyard/payments/store/migrations.js";
import { SqlPaymentsStore } from "@switchyard/payments/store/sql-store.js";

export interface StoreReadResult {
  engine: string;
  reads: number;
  /** CPU time of this process per read, in ms. */
  cpuMsPerRead: number;
  /** Wall time per read, in ms. */
  wallMsPerRead: number;
}

const TENANT = "bench";

export async function measureStoreRead(reads = 20_000): Promise<StoreReadResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-store-read-"));
  const db = await openSqlDatabase({ dataDir, schema: "payments", migrations: paymentsMigrations });
  try {
    const store = new SqlPaymentsStore(db);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const { result } = await store.createPayment(
        TENANT,
        { principal: "user:1", key: crypto.randomUUID(), requestHash: "bench" },
        { amount: 1250n, currency: "EUR", source: "tok_visa", ownerUserId: 1n, reference: "" },
      );
      ids.push(result.id);
    }
    const read = async (count: number) => {
      for (let i = 0; i < count; i++)
        if (!(await store.getPayment(TENANT, ids[i % ids.length]!))) throw new Error("a payment went missing");
    };
    await read(2_000); // warm-up: compiled code, prepared statements
    const cpu = process.cpuUsage();
    const started = performance.now();
    await read(reads);
    const wallMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    return {
      engine: db.engine,
      reads,
      cpuMsPerRead: (used.user + used.system) / 1_000 / reads,
      wallMsPerRead: wallMs / reads,
    };
  } finally {
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

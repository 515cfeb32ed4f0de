// The same-work reference (issue 34): what GET /v1/payments/{id} and GET /v1/docs/{id} cost with
// the libraries alone — node:http → @grpc/grpc-js → a @grpc/grpc-js server doing the stores' one
// prepared-statement read by id and tenant, JSON out (bench/servers/same-work-front.ts →
// same-work-read.ts) — on the engine the mesh runs, with the mesh's node flags and embedded engine
// settings. Its rows are made beforehand by the services' own code (same-work-data.ts); its two
// processes import nothing of the project (test/same-work-reference.test.ts reads their imports).
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { PGLITE_SETTINGS } from "@switchyard/platform/store";
import { NODE_FLAGS } from "../scripts/mesh.js";
import type { Setup } from "./load/interleaved.js";
import { ROOT, startServer, type ServerProcess } from "./processes.js";
import { serverSchemas } from "./server-schemas.js";

const TENANT = "bench";

/** The rows one or more starts of the reference read (read only: every start reads the same ones). */
export interface ReferenceData {
  /** The read server's environment: where the rows are. */
  readonly env: NodeJS.ProcessEnv;
  readonly paymentId: string;
  readonly documentId: string;
  remove(): Promise<void>;
}

/** A PGlite cluster in a temporary directory, or fresh schemas on the PostgreSQL server, holding one payment and one document. */
export async function prepareReferenceData(databaseUrl: string | undefined): Promise<ReferenceData> {
  const dataDir = databaseUrl ? undefined : await mkdtemp(join(tmpdir(), "switchyard-bench-ref-"));
  const schemas = databaseUrl ? serverSchemas(databaseUrl, "ref") : undefined;
  const remove = async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    await schemas?.drop();
  };
  const env: NodeJS.ProcessEnv = {
    TENANT,
    PAYMENTS_SCHEMA: schemas?.env.PAYMENTS_DB_SCHEMA ?? "payments",
    CONTENT_SCHEMA: schemas?.env.CONTENT_DB_SCHEMA ?? "content",
    ...(databaseUrl
      ? { DATABASE_URL: databaseUrl, DATA_DIR: "" }
      : { DATA_DIR: dataDir, DATABASE_URL: "", PGLITE_SETTINGS: PGLITE_SETTINGS.join(" ") }),
  };
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...NODE_FLAGS, "--import", "tsx", "bench/same-work-data.ts"],
      { cwd: ROOT, env: { ...process.env, ...env } },
    );
    const ids = JSON.parse(stdout.trim().split("\n").at(-1)!) as { paymentId: string; documentId: string };
    return { env, ...ids, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

/**
 * One start of the reference: its read server and its front. Targets: "payment" and "document" (R,
 * the id answered) and "payment-record" and "document-record" (R+, the whole record as the gateway represents it).
 */
export async function startSameWorkReference(data: ReferenceData): Promise<Setup> {
  let read: ServerProcess | undefined;
  let front: ServerProcess | undefined;
  const stop = async () => void (await Promise.allSettled([front?.stop(), read?.stop()]));
  try {
    read = await startServer("same-work-read.ts", data.env, NODE_FLAGS);
    front = await startServer("same-work-front.ts", { READ_ADDRESS: read.address }, NODE_FLAGS);
    const url = (path: string) => ({ url: `http://${front!.address}${path}` });
    return {
      targets: {
        payment: url(`/id/payments/${data.paymentId}`),
        document: url(`/id/docs/${data.documentId}`),
        "payment-record": url(`/record/payments/${data.paymentId}`),
        "document-record": url(`/record/docs/${data.documentId}`),
      },
      processes: { front: front.pid, read: read.pid },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// The worker that runs catalog import jobs in the background, in the content service (never in the
// gateway: a job lives in content's database and outlives any gateway). It claims the oldest runnable
// job under a lease, then feeds its stored lines — each an encoded ImportItemsRequest — as a stream
// through the ImportItems implementation (catalog-import.ts), a chunk at a time: each chunk's catalog
// writes, the job's progress and its per-line errors commit together, so a job interrupted anywhere
// resumes exactly after its last chunk, never importing a line twice nor skipping one.
//
// A job whose runner went away (its process crashed or was killed: the lease ran out) is taken up
// again by any runner; after `maxInterruptions` it fails instead, so a job that keeps killing its
// process cannot stay `running` forever. On embedded storage one process owns the database, so at
// start every job still marked running was interrupted and is taken up at once. A runner stopping
// cleanly gives its job back to the queue.
import { fromBinary } from "@bufbuild/protobuf";
import { ImportItemsRequestSchema, type ImportItemsRequest } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { newId } from "@switchyard/platform/ids.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { importCatalogItems, type CatalogWriter } from "./catalog-import.js";
import { lineMessage, type ImportLineError, type ImportLineInput } from "./domain/imports.js";
import type { ImportChunkOutcome, ImportJobStore } from "./store/import-jobs/port.js";

/** How soon a job whose step failed is tried again by the runner that holds it. */
const HELD_RETRY_MS = 500;

export interface ImportJobRunnerOptions {
  /** How long a claim holds without being renewed (every chunk renews it). */
  leaseMs?: number;
  /** How often an idle runner looks for work that no wake-up announced (another replica's, or an interrupted job). */
  pollMs?: number;
  /** Lines per chunk (per transaction). */
  chunkLines?: number;
  /** A job interrupted this many times fails. */
  maxInterruptions?: number;
  /** Embedded storage: this process is the only one running jobs, so jobs running at start were interrupted. */
  soleRunner?: boolean;
  /** Resolves once the edge caches applied every change committed so far (cache-leases.ts). */
  cachesApplied?: () => Promise<void>;
}

/** One chunk of a job through ImportItems' implementation: the items imported, and every line refused. */
export async function runImportLines(
  lines: readonly ImportLineInput[],
  catalog: CatalogWriter,
): Promise<ImportChunkOutcome> {
  const errors: ImportLineError[] = [];
  // The line of each message in the stream, by its index there (ImportItems reports rejections by index).
  const lineOf: number[] = [];
  async function* requests(): AsyncGenerator<ImportItemsRequest> {
    for (const l of lines) {
      if (!l.request) {
        errors.push({
          line: l.line,
          code: l.problem?.code ?? "INVALID_REQUEST",
          message: l.problem?.message ?? "not a catalog item",
        });
        continue;
      }
      lineOf.push(l.line);
      yield fromBinary(ImportItemsRequestSchema, l.request);
    }
  }
  const summary = await importCatalogItems(requests(), catalog);
  for (const r of summary.rejected)
    errors.push({ line: lineOf[r.index]!, code: "RULE_VIOLATION", message: lineMessage(r.reason) });
  errors.sort((a, b) => a.line - b.line);
  return { imported: summary.created + summary.updated, errors };
}

export class ImportJobRunner {
  private readonly runnerId = newId("runner");
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly chunkLines: number;
  private readonly maxInterruptions: number;
  private stopping = false;
  private pending = false;
  private wakeUp: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly store: ImportJobStore,
    private readonly logger: Logger,
    private readonly options: ImportJobRunnerOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 30_000;
    this.pollMs = options.pollMs ?? 5_000;
    this.chunkLines = options.chunkLines ?? 50;
    this.maxInterruptions = options.maxInterruptions ?? 3;
  }

  /** Starts the loop. Called when the service starts, outside any call: a job is nobody's request. */
  start(): void {
    this.loop ??= this.run();
  }

  /** A job was queued: look now rather than at the next poll. */
  wake(): void {
    this.pending = true;
    this.wakeUp?.();
  }

  /** Finishes the chunk under way, gives its job back to the queue, and ends the loop. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    if (this.options.soleRunner) {
      try {
        const interrupted = await this.store.expireImportLeases();
        if (interrupted > 0)
          this.logger.warn(
            { jobs: interrupted },
            "import jobs were left running by an earlier process: taking them up again",
          );
      } catch (err) {
        this.logger.warn({ message: String(err) }, "could not look for interrupted import jobs");
      }
    }
    /** A job this runner holds whose last step failed (its database away a moment): taken up again first. */
    let held: string | undefined;
    while (!this.stopping) {
      let worked = false;
      try {
        this.pending = false;
        if (held !== undefined) {
          worked = true;
          await this.runJob(held);
          held = undefined;
          continue;
        }
        const { claimed, failed } = await this.store.claimImportJob(this.runnerId, this.leaseMs, this.maxInterruptions);
        for (const id of failed)
          this.logger.warn(
            { job: id, interruptions: this.maxInterruptions },
            "import job failed: interrupted too often",
          );
        if (claimed) {
          worked = true;
          held = claimed.id;
          if (claimed.interrupted) this.logger.warn({ job: claimed.id }, "import job resumed after an interruption");
          await this.runJob(claimed.id);
          held = undefined;
        }
      } catch (err) {
        // A step's transaction rolled back: the job is still this runner's (its lease), so it goes on
        // from its last chunk once the database answers — not a lease later. Should the lease run out
        // meanwhile, the next step finds it lost and another runner has it.
        this.logger.warn({ message: String(err), job: held }, "import job runner: a step failed; trying again");
        worked = false;
      }
      if (!worked) await this.idle(held === undefined ? this.pollMs : HELD_RETRY_MS);
    }
  }

  private async runJob(id: string): Promise<void> {
    for (;;) {
      if (this.stopping) {
        await this.store.releaseImportJob(id, this.runnerId);
        return;
      }
      const step = await this.store.runImportChunk({
        jobId: id,
        runner: this.runnerId,
        leaseMs: this.leaseMs,
        lines: this.chunkLines,
        work: runImportLines,
      });
      if (step === "lost") {
        this.logger.warn({ job: id }, "import job: the claim was lost to another runner");
        return;
      }
      if (step === "done") {
        // Succeeded only once no edge cache serves a catalog page from before it: a client that
        // polls the job and then reads the catalog sees its items.
        await this.options.cachesApplied?.();
        if (await this.store.completeImportJob(id, this.runnerId)) this.logger.info({ job: id }, "import job finished");
        else this.logger.warn({ job: id }, "import job: the claim was lost to another runner");
        return;
      }
    }
  }

  private idle(ms: number): Promise<void> {
    if (this.pending || this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }
}

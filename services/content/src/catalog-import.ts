// The implementation of ImportItems: a stream of ImportItemsRequest messages in, one summary out.
// The RPC hands it the client's stream; an import job's worker (import-jobs.ts) hands it the job's
// stored messages, a chunk at a time, with a catalog writer bound to the chunk's transaction.
import type { ImportItemsRequest } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { catalogItemProblem, type CatalogItemInput } from "./domain/content.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

export const MAX_IMPORT_ITEMS = 10_000;

/** Where imported items are written: the store, or a transaction of it. */
export interface CatalogWriter {
  /** Creates or replaces by sku; true when it was created. `call`: the call it is done for, if any. */
  upsertCatalogItem(item: CatalogItemInput, call?: CallScope): Promise<boolean>;
}

export interface ImportSummary {
  created: number;
  updated: number;
  /** Items refused, by their position in the stream (from 0), with the rule they break. */
  rejected: { index: number; sku: string; reason: string }[];
}

export async function importCatalogItems(
  requests: AsyncIterable<Pick<ImportItemsRequest, "item">>,
  catalog: CatalogWriter,
  call?: CallScope,
): Promise<ImportSummary> {
  let created = 0;
  let updated = 0;
  const rejected: ImportSummary["rejected"] = [];
  let index = 0;
  for await (const { item } of requests) {
    const i = index++;
    if (i >= MAX_IMPORT_ITEMS) {
      rejected.push({ index: i, sku: item?.sku ?? "", reason: `an import takes at most ${MAX_IMPORT_ITEMS} items` });
      continue;
    }
    const input = {
      sku: item?.sku ?? "",
      name: item?.name ?? "",
      price: item?.price ?? 0n,
      currency: item?.currency ?? "",
    };
    const problem = item ? catalogItemProblem(input) : "item is required";
    if (problem) {
      rejected.push({ index: i, sku: input.sku, reason: problem });
      continue;
    }
    if (await catalog.upsertCatalogItem(input, call)) created++;
    else updated++;
  }
  return { created, updated, rejected };
}

// Prices come from the catalog (content's BatchGetCatalogItems), asked with the caller's remaining
// deadline and cancelled with the caller: content unreachable or too slow → 502 / 504, nothing stored.
import type { HandlerContext } from "@connectrpc/connect";
import type { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import type { Caller } from "@switchyard/platform/caller.js";
import { downstreamOptions } from "@switchyard/platform/auth.js";
import { downstreamTimeoutMs } from "@switchyard/platform/call-deadline.js";
import type { Client } from "@switchyard/platform/grpc";
import type { CatalogPrice } from "../domain/orders.js";
import { stepCallMs } from "../domain/steps.js";

export async function catalogPrices(
  content: Client<typeof ContentService>,
  skus: readonly string[],
  caller: Caller,
  ctx: HandlerContext,
): Promise<Map<string, CatalogPrice>> {
  const { items } = await content.batchGetCatalogItems(
    { skus: [...new Set(skus)] },
    { ...downstreamOptions(caller, ctx), timeoutMs: stepCallMs(downstreamTimeoutMs(ctx.timeoutMs())) },
  );
  return new Map(items.map((i) => [i.sku, { price: i.price, currency: i.currency }]));
}

// What a delivery of an event sends, once for every endpoint and attempt (it is signed as it is): the
// event's id, type, time and tenant, and the resource in its public v2 representation — rendered by
// the functions that render the API's own answers, so `data` and a GET of the resource never differ.
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Event } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { orderJson } from "@switchyard/platform/representations/orders.js";
import { paymentJson, refundJson } from "@switchyard/platform/representations/payments.js";

function dataOf(resource: Event["resource"]): unknown {
  switch (resource.case) {
    case "payment":
      return paymentJson(resource.value);
    case "refund":
      return refundJson(resource.value);
    case "order":
      return orderJson(resource.value);
    default:
      throw new Error("an event without a resource");
  }
}

export function eventPayload(event: Event): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: timestampDate(event.occurTime!).toISOString(),
    tenant_id: event.tenantId,
    data: dataOf(event.resource),
  });
}

/** A test event's payload: its data names the endpoint it was sent to. */
export function testEventPayload(
  event: { id: string; tenantId: string; occurredAt: Date },
  endpointId: string,
): string {
  return JSON.stringify({
    id: event.id,
    type: "webhook.test",
    timestamp: event.occurredAt.toISOString(),
    tenant_id: event.tenantId,
    data: { endpoint_id: endpointId },
  });
}

// Internal records → proto messages, field by field.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DeliverySchema,
  DeliveryStatus,
  EndpointSchema,
  type Delivery,
  type Endpoint,
} from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import type { DeliveryRecord } from "./store/delivery-port.js";
import type { EndpointRecord } from "./store/port.js";

export function endpointToProto(e: EndpointRecord): Endpoint {
  return create(EndpointSchema, {
    id: e.id,
    url: e.url,
    eventTypes: e.eventTypes,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    createTime: timestampFromDate(e.createdAt),
    updateTime: timestampFromDate(e.updatedAt),
    ...(e.previousSecretExpiresAt ? { previousSecretExpireTime: timestampFromDate(e.previousSecretExpiresAt) } : {}),
  });
}

const STATUS: Record<DeliveryRecord["status"], DeliveryStatus> = {
  pending: DeliveryStatus.PENDING,
  delivered: DeliveryStatus.DELIVERED,
  failed: DeliveryStatus.FAILED,
};

export function deliveryToProto(d: DeliveryRecord): Delivery {
  return create(DeliverySchema, {
    id: d.id,
    eventId: d.eventId,
    eventType: d.eventType,
    status: STATUS[d.status],
    createTime: timestampFromDate(d.createdAt),
    nextAttemptTime: timestampFromDate(d.nextAttemptAt),
    attempts: d.attempts.map((a) => ({
      attemptTime: timestampFromDate(a.attemptedAt),
      statusCode: a.status ?? 0,
      latencyMs: a.latencyMs,
      responseExcerpt: a.excerpt,
      error: a.error ?? "",
    })),
  });
}

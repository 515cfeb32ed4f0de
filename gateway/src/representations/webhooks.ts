// Public representations of webhook endpoints. The signing secret appears only where the service
// answered one (creation and its replay, rotation).
import { DeliveryStatus, type Delivery, type Endpoint } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { isoTime } from "@switchyard/platform/representations/time.js";

export function webhookEndpointJson(e: Endpoint) {
  return {
    id: e.id,
    url: e.url,
    event_types: e.eventTypes,
    enabled: e.enabled,
    disabled_reason: e.disabledReason === "" ? null : e.disabledReason,
    previous_secret_expires_at: isoTime(e.previousSecretExpireTime),
    created_at: isoTime(e.createTime),
    updated_at: isoTime(e.updateTime),
  };
}

/** The endpoint with the secret that signs its deliveries from now on. */
export function webhookEndpointWithSecretJson(e: Endpoint, secret: string) {
  return { ...webhookEndpointJson(e), secret };
}

const DELIVERY_STATUS: Record<DeliveryStatus, string> = {
  [DeliveryStatus.UNSPECIFIED]: "pending",
  [DeliveryStatus.PENDING]: "pending",
  [DeliveryStatus.DELIVERED]: "delivered",
  [DeliveryStatus.FAILED]: "failed",
};

/** A delivery of an event to an endpoint, with its attempts (oldest first). */
export function webhookDeliveryJson(d: Delivery) {
  const status = DELIVERY_STATUS[d.status] ?? "pending";
  return {
    id: d.id,
    event_id: d.eventId,
    event_type: d.eventType,
    status,
    created_at: isoTime(d.createTime),
    next_attempt_at: status === "pending" ? isoTime(d.nextAttemptTime) : null,
    attempts: d.attempts.map((a) => ({
      attempted_at: isoTime(a.attemptTime),
      status_code: a.statusCode === 0 ? null : a.statusCode,
      latency_ms: a.latencyMs,
      response_excerpt: a.responseExcerpt,
      error: a.error === "" ? null : a.error,
    })),
  };
}

// Public representations of webhook endpoints. The signing secret appears only where the service
// answered one (creation and its replay, rotation).
import type { Endpoint } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
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

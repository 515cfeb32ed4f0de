// Events as the producing services hand them over, without I/O: who makes which type, and what an
// event must carry to be recorded.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { isIdOf } from "@switchyard/platform/ids.js";
import type { EventType } from "./endpoints.js";

/** The types each producing service makes (by its service name): it records those, and no other. */
export const EVENT_TYPES_BY_PRODUCER: Readonly<Record<string, readonly EventType[]>> = {
  payments: ["payment.succeeded", "refund.succeeded"],
  orders: ["order.paid", "order.shipped", "order.cancelled"],
};

/** The resource each type carries. */
export const RESOURCE_OF_TYPE: Readonly<Record<EventType, "payment" | "refund" | "order">> = {
  "payment.succeeded": "payment",
  "refund.succeeded": "refund",
  "order.paid": "order",
  "order.shipped": "order",
  "order.cancelled": "order",
};

/** The most events one RecordEvents call takes. */
export const MAX_EVENTS_PER_CALL = 100;

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Refuses what `producer` may not record: another service's type, an ill-formed id or tenant, a resource of another kind. */
export function checkProducedEvent(
  producer: string,
  event: { id: string; type: string; tenantId: string; resource: string | undefined; occurred: boolean },
): EventType {
  const own = EVENT_TYPES_BY_PRODUCER[producer] ?? [];
  const type = own.find((t) => t === event.type);
  if (!type) throw new DomainError("INVALID_REQUEST", `${producer} does not make ${event.type} events`);
  if (!isIdOf("evt", event.id)) throw new DomainError("INVALID_REQUEST", "an event id is evt_ and 20 characters");
  if (!TENANT_ID.test(event.tenantId)) throw new DomainError("INVALID_REQUEST", "tenant_id must be a tenant id");
  if (event.resource !== RESOURCE_OF_TYPE[type])
    throw new DomainError("INVALID_REQUEST", `a ${type} event carries a ${RESOURCE_OF_TYPE[type]}`);
  if (!event.occurred) throw new DomainError("INVALID_REQUEST", "an event has its occur_time");
  return type;
}

/** The type of the event an admin sends an endpoint to try it (never made by a producer). */
export const TEST_EVENT_TYPE = "webhook.test";

/** Only an enabled endpoint is sent anything, a test too. */
export function requireEnabled(endpoint: { enabled: boolean }): void {
  if (!endpoint.enabled)
    throw new DomainError(
      "INVALID_STATE",
      "the endpoint is disabled: enable it (PATCH enabled: true) to send it events",
    );
}

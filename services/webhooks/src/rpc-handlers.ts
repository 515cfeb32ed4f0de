// WebhookService RPC handlers: proto in, proto out. The tenant comes from the verified token only;
// every method is for the tenant's admins (domain/endpoints.ts), an endpoint of another tenant is
// never found.
import type { ServiceImpl } from "@connectrpc/connect";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { principalOf, type Caller } from "@switchyard/platform/caller.js";
import { fail } from "@switchyard/platform/errors.js";
import {
  authentication,
  callerOf,
  callScopeOf,
  idempotencyKeys,
  serviceCallerOf,
  USERS,
} from "@switchyard/platform/grpc";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Authenticator, CallPolicy, ServiceInterceptor } from "@switchyard/platform/grpc";
import { requestFingerprint } from "@switchyard/platform/idempotency-keys.js";
import { isIdOf, newId } from "@switchyard/platform/ids.js";
import { decodeCursor, pageOf, pageSizeOf } from "@switchyard/platform/paging.js";
import type { DestinationPolicy } from "./domain/destinations.js";
import {
  PREVIOUS_SECRET_VALID_MS,
  requireEndpointAdmin,
  validateEndpointUrl,
  validateEventTypes,
} from "./domain/endpoints.js";
import {
  checkProducedEvent,
  EVENT_TYPES_BY_PRODUCER,
  MAX_EVENTS_PER_CALL,
  requireEnabled,
  TEST_EVENT_TYPE,
} from "./domain/events.js";
import { newEndpointSecret } from "./endpoint-secrets.js";
import { eventPayload, testEventPayload } from "./event-payload.js";
import { deliveryToProto, endpointToProto } from "./proto-mapping.js";
import type { DeliveriesStore } from "./store/delivery-port.js";
import type { EndpointRecord, WebhooksStore } from "./store/port.js";
import { checkDestination, type ResolveName } from "./workflow/destination-check.js";

export interface WebhooksDeps {
  store: WebhooksStore;
  deliveries: DeliveriesStore;
  /** Told when deliveries were made due (the delivery worker looks for due deliveries at once). */
  onRecorded?: () => void;
  /** Which destinations are allowed (the operator's settings). */
  destinations: DestinationPolicy;
  resolve: ResolveName;
}

/** Users for endpoints (what a user may do is the domain's rule: admins of the tenant); the producing services for their events. */
export const webhooksCallPolicy: CallPolicy<typeof WebhookService> = {
  createEndpoint: USERS,
  getEndpoint: USERS,
  listEndpoints: USERS,
  updateEndpoint: USERS,
  deleteEndpoint: USERS,
  rotateEndpointSecret: USERS,
  listEndpointDeliveries: USERS,
  sendTestEvent: USERS,
  redeliver: USERS,
  recordEvents: { services: Object.keys(EVENT_TYPES_BY_PRODUCER) },
};

export const webhooksInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof WebhookService>({ authenticator, access: webhooksCallPolicy }),
  idempotencyKeys<typeof WebhookService>({ createEndpoint: "required" }),
];

function endpointIdOf(raw: string): string {
  if (!isIdOf("we", raw)) throw fail("NOT_FOUND", "endpoint not found");
  return raw;
}

const found = (endpoint: EndpointRecord | undefined): EndpointRecord => {
  if (!endpoint) throw fail("NOT_FOUND", "endpoint not found");
  return endpoint;
};

const keyOf = (r: { createdAt: Date; id: string }) => ({ createdAt: r.createdAt, id: r.id });

export function webhookHandlers({
  store,
  deliveries,
  onRecorded,
  destinations,
  resolve,
}: WebhooksDeps): ServiceImpl<typeof WebhookService> {
  /** The URL, checked as written and by every address its host resolves to now. */
  async function destinationOf(raw: string): Promise<string> {
    const url = validateEndpointUrl(raw, destinations);
    await checkDestination(url, destinations, resolve);
    return url.href;
  }

  /** The caller, if a tenant admin (else 403). */
  function admin(caller: Caller): Caller {
    requireEndpointAdmin(caller);
    return caller;
  }

  return {
    async createEndpoint(req, ctx) {
      const caller = admin(callerOf(ctx));
      const eventTypes = validateEventTypes(req.eventTypes);
      const url = await destinationOf(req.url);
      const key = {
        principal: principalOf(caller),
        key: req.idempotencyKey,
        requestHash: requestFingerprint({ url, eventTypes: JSON.stringify(eventTypes) }),
        call: callScopeOf(ctx),
      };
      const outcome = await store.createEndpoint(caller.tenantId, key, {
        url,
        eventTypes,
        secret: newEndpointSecret(),
      });
      return {
        endpoint: endpointToProto(outcome.result.endpoint),
        secret: outcome.result.secret,
        replayed: outcome.replayed,
      };
    },

    async getEndpoint(req, ctx) {
      const caller = admin(callerOf(ctx));
      return {
        endpoint: endpointToProto(found(await store.getEndpoint(caller.tenantId, endpointIdOf(req.endpointId)))),
      };
    },

    async listEndpoints(req, ctx) {
      const caller = admin(callerOf(ctx));
      const size = pageSizeOf(req.pageSize);
      const collection = `endpoints:${caller.tenantId}`;
      const rows = await store.listEndpoints(caller.tenantId, decodeCursor(collection, req.pageToken), size + 1);
      const page = pageOf(rows, size, { collection, keyOf });
      return { endpoints: page.items.map(endpointToProto), nextPageToken: page.nextCursor };
    },

    async updateEndpoint(req, ctx) {
      const caller = admin(callerOf(ctx));
      const id = endpointIdOf(req.endpointId);
      const change = {
        ...(req.eventTypes === undefined ? {} : { eventTypes: validateEventTypes(req.eventTypes.values) }),
        ...(req.url === undefined ? {} : { url: await destinationOf(req.url) }),
        ...(req.enabled === undefined ? {} : { enabled: req.enabled }),
      };
      return { endpoint: endpointToProto(found(await store.updateEndpoint(caller.tenantId, id, change))) };
    },

    async deleteEndpoint(req, ctx) {
      const caller = admin(callerOf(ctx));
      if (!(await store.deleteEndpoint(caller.tenantId, endpointIdOf(req.endpointId))))
        throw fail("NOT_FOUND", "endpoint not found");
      return {};
    },

    async rotateEndpointSecret(req, ctx) {
      const caller = admin(callerOf(ctx));
      const secret = newEndpointSecret();
      const endpoint = found(
        await store.rotateSecret(caller.tenantId, endpointIdOf(req.endpointId), secret, PREVIOUS_SECRET_VALID_MS),
      );
      return { endpoint: endpointToProto(endpoint), secret };
    },

    async sendTestEvent(req, ctx) {
      const caller = admin(callerOf(ctx));
      const endpoint = found(await store.getEndpoint(caller.tenantId, endpointIdOf(req.endpointId)));
      requireEnabled(endpoint);
      const event = { id: newId("evt"), tenantId: caller.tenantId, occurredAt: new Date() };
      const delivery = await deliveries.recordEventFor(
        endpoint.id,
        {
          ...event,
          type: TEST_EVENT_TYPE,
          body: testEventPayload(event, endpoint.id),
        },
        callScopeOf(ctx),
      );
      onRecorded?.();
      return { delivery: deliveryToProto(delivery) };
    },

    async redeliver(req, ctx) {
      const caller = admin(callerOf(ctx));
      const endpoint = found(await store.getEndpoint(caller.tenantId, endpointIdOf(req.endpointId)));
      requireEnabled(endpoint);
      const delivery = isIdOf("whd", req.deliveryId)
        ? await deliveries.redeliver(endpoint.id, req.deliveryId)
        : undefined;
      if (!delivery) throw fail("NOT_FOUND", "delivery not found");
      onRecorded?.();
      return { delivery: deliveryToProto(delivery) };
    },

    async listEndpointDeliveries(req, ctx) {
      const caller = admin(callerOf(ctx));
      const endpoint = found(await store.getEndpoint(caller.tenantId, endpointIdOf(req.endpointId)));
      const size = pageSizeOf(req.pageSize);
      const collection = `deliveries:${caller.tenantId}:${endpoint.id}`;
      const rows = await deliveries.listDeliveries(endpoint.id, decodeCursor(collection, req.pageToken), size + 1);
      const page = pageOf(rows, size, { collection, keyOf });
      return { deliveries: page.items.map(deliveryToProto), nextPageToken: page.nextCursor };
    },

    async recordEvents(req, ctx) {
      const { service } = serviceCallerOf(ctx);
      if (req.events.length > MAX_EVENTS_PER_CALL)
        throw fail("INVALID_REQUEST", `at most ${MAX_EVENTS_PER_CALL} events per call`);
      // All checked before any is recorded: a refused call records nothing.
      const events = req.events.map((e) => ({
        id: e.id,
        tenantId: e.tenantId,
        type: checkProducedEvent(service, {
          id: e.id,
          type: e.type,
          tenantId: e.tenantId,
          resource: e.resource.case,
          occurred: e.occurTime !== undefined,
        }),
        occurredAt: timestampDate(e.occurTime!),
        body: eventPayload(e),
      }));
      const { recorded, deliveries: made } = await deliveries.recordEvents(events, callScopeOf(ctx));
      // No endpoint asked for them: nothing to deliver, no claim to make.
      if (made > 0) onRecorded?.();
      return { recorded };
    },
  };
}

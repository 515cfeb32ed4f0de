// A producing service's outbox relayed to the webhooks service (RecordEvents), as the service itself:
// its own token beside the call (its certificate, under mutual TLS). Each service says how one of its
// outbox events reads as an Event (its resource's message).
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Client as GrpcChannel } from "@grpc/grpc-js";
import { WebhookService, type Event } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { SERVICE_AUTHORIZATION } from "./caller.js";
import { createServiceClient } from "./grpc/client.js";
import type { Logger } from "./logger.js";
import { OutboxRelay } from "./outbox-relay.js";
import type { ServiceCredentials } from "./service-credentials.js";
import type { OutboxEvent, SqlDatabase } from "./store/index.js";

/** An outbox event's resource, as the Event's oneof (the producer knows which message it encoded). */
export type EventResource = Event["resource"];

const CALL_TIMEOUT_MS = 5_000;

export function webhookRelay(
  db: SqlDatabase,
  to: { channel: GrpcChannel; credentials: ServiceCredentials | undefined },
  resourceOf: (event: OutboxEvent) => EventResource,
  logger: Logger,
): OutboxRelay {
  const webhooks = createServiceClient(WebhookService, to.channel);
  return new OutboxRelay(
    db,
    async (events, signal) => {
      const token = to.credentials && (await to.credentials.token());
      await webhooks.recordEvents(
        {
          events: events.map((e) => ({
            id: e.id,
            type: e.type,
            tenantId: e.tenantId,
            occurTime: timestampFromDate(e.occurredAt),
            resource: resourceOf(e),
          })),
        },
        { signal, timeoutMs: CALL_TIMEOUT_MS, headers: token ? { [SERVICE_AUTHORIZATION]: `Bearer ${token}` } : {} },
      );
    },
    { pollMs: 250, batch: 100, logger },
  );
}

// A producing service's outbox relayed to the webhooks service (RecordEvents), as the service itself:
// its own token beside the call (its certificate, under mutual TLS). Each service says how one of its
// outbox events reads as an Event (its resource's message). One replica of the service relays at a
// time (the lease `outbox.relay` in its schema), woken by each committed event.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Client as GrpcChannel } from "@grpc/grpc-js";
import { WebhookService, type Event } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { SERVICE_AUTHORIZATION } from "./caller.js";
import { parse, setting } from "./config.js";
import { createServiceClient } from "./grpc/client.js";
import type { Logger } from "./logger.js";
import { OutboxRelay } from "./outbox-relay.js";
import type { ServiceCredentials } from "./service-credentials.js";
import type { OutboxEvent, SqlDatabase } from "./store/index.js";

/** An outbox event's resource, as the Event's oneof (the producer knows which message it encoded). */
export type EventResource = Event["resource"];

const CALL_TIMEOUT_MS = 5_000;

/** A producing service's relay settings (spread into its settings). */
export const webhookRelaySettings = {
  outboxPollMs: setting(
    "OUTBOX_RELAY_POLL_MS",
    parse.int(50, 600_000),
    "how often the outbox of partner events is looked at without a notification (each commit wakes the relay by NOTIFY: this is only a safety net)",
    5_000,
  ),
  outboxLeaseMs: setting(
    "OUTBOX_RELAY_LEASE_MS",
    parse.int(300, 600_000),
    "how long the relaying replica's lease lasts: one replica relays the outbox at a time, and when it is killed another takes over within about this long",
    10_000,
  ),
};

export function webhookRelay(
  db: SqlDatabase,
  to: { channel: GrpcChannel; credentials: ServiceCredentials | undefined },
  resourceOf: (event: OutboxEvent) => EventResource,
  { logger, pollMs, leaseMs }: { logger: Logger; pollMs: number; leaseMs: number },
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
    {
      pollMs,
      batch: 100,
      logger,
      lease: {
        name: "outbox.relay",
        holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
        ttlMs: leaseMs,
      },
    },
  );
}

import type { CallScope } from "@switchyard/platform/call-deadline.js";
// What delivering events needs from storage: events recorded once each, with a delivery per endpoint
// that asked for their type; deliveries claimed by lease, and each attempt's outcome.

export interface NewEvent {
  /** evt_… of the producing service's outbox: an event recorded twice is recorded once. */
  id: string;
  tenantId: string;
  type: string;
  occurredAt: Date;
  /** The JSON every delivery of it sends (and signs) as it is. */
  body: string;
}

/** A delivery claimed for one attempt, with what the attempt needs. */
export interface ClaimedDelivery {
  id: string;
  tenantId: string;
  endpointId: string;
  url: string;
  eventId: string;
  body: string;
  /** Attempts made before this one. */
  attempts: number;
  firstAttemptAt: Date | undefined;
}

export interface AttemptRecord {
  attemptedAt: Date;
  /** The answer's status; undefined when none came. */
  status: number | undefined;
  latencyMs: number;
  excerpt: string;
  error: string | undefined;
}

/** After an attempt: delivered, tried again at a time, or given up (failed for good). */
export type AttemptVerdict =
  | { kind: "delivered" }
  | { kind: "retry"; at: Date }
  /** Given up; the endpoint is disabled when nothing was delivered to it for `disableAfterMs`. */
  | { kind: "failed"; disableAfterMs: number };

/** A delivery as an endpoint's list shows it, with its attempts (oldest first). */
export interface DeliveryRecord {
  id: string;
  eventId: string;
  eventType: string;
  status: "pending" | "delivered" | "failed";
  createdAt: Date;
  nextAttemptAt: Date;
  attempts: AttemptRecord[];
}

/** What recording a batch of events did. */
export interface RecordedEvents {
  /** The events that were new (the others had been recorded before: a relay sent them again). */
  recorded: number;
  /** The deliveries made for them: none, and there is nothing to deliver. */
  deliveries: number;
}

export interface DeliveriesStore {
  /** An endpoint's deliveries, newest first (keyset on created_at, id), each with its attempts. */
  listDeliveries(
    endpointId: string,
    after: { createdAt: Date; id: string } | undefined,
    limit: number,
  ): Promise<DeliveryRecord[]>;
  /**
   * Records the events, each once by its id, and — in the same transaction, for each that is new — a
   * delivery to each enabled endpoint of its tenant that asked for its type. One transaction for the
   * whole batch: a relay's call is recorded all or nothing.
   */
  recordEvents(events: readonly NewEvent[], call?: CallScope): Promise<RecordedEvents>;
  /** Records an event for one endpoint alone (a test), with its delivery, whatever types the endpoint asked for. */
  recordEventFor(endpointId: string, event: NewEvent, call?: CallScope): Promise<DeliveryRecord>;
  /** Makes one of the endpoint's deliveries due now again, with a new span of retries; undefined when there is none. */
  redeliver(endpointId: string, deliveryId: string): Promise<DeliveryRecord | undefined>;
  /**
   * Leases up to `limit` due deliveries to `holder` for `leaseMs` (one holder at a time per delivery;
   * a lease that ran out — its holder died mid-attempt — is taken again), never more than
   * `perEndpoint` in flight at once for one endpoint. Oldest due first.
   */
  claimDue(
    holder: string,
    options: { limit: number; perEndpoint: number; leaseMs: number },
  ): Promise<ClaimedDelivery[]>;
  /**
   * Records the attempt and what follows (delivered, tried again at, failed — and then perhaps the
   * endpoint disabled); the delivery changes only while `holder` still holds its lease (an attempt
   * made after the lease ran out is still recorded). Returns whether the endpoint was disabled now.
   */
  finishAttempt(
    delivery: ClaimedDelivery,
    holder: string,
    attempt: AttemptRecord,
    verdict: AttemptVerdict,
  ): Promise<{ endpointDisabled: boolean }>;
}

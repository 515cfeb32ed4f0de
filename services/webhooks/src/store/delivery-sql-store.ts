// DeliveriesStore on the PostgreSQL-family adapter. An event and its deliveries commit together;
// claims are made one at a time (a transaction-scoped advisory lock: a claim takes milliseconds), so
// the bound on an endpoint's deliveries in flight holds across every replica.
import { newId } from "@switchyard/platform/ids.js";
import { KeysetPageQuery, type SqlDatabase } from "@switchyard/platform/store";
import type { CallScope } from "@switchyard/platform/call-deadline.js";
import type {
  AttemptRecord,
  AttemptVerdict,
  ClaimedDelivery,
  DeliveriesStore,
  DeliveryRecord,
  NewEvent,
  RecordedEvents,
} from "./delivery-port.js";

interface ClaimedRow {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  url: string;
  event_id: string;
  body: string;
  attempts: number;
  first_attempt_at: Date | null;
}

const NOW = "clock_timestamp()";
const ms = (param: string) => `${param}::bigint * interval '1 millisecond'`;

// The due deliveries of enabled endpoints: for each, the oldest due ones up to the bound less its leases
// in flight, then the oldest of those. Each endpoint's are read from an index in their order, so a
// claim costs the few it takes, not the whole backlog (a burst of 10,000 left it ranking all of them).
const CLAIM = `
WITH in_flight AS (
  SELECT endpoint_id, count(*) AS n FROM deliveries
  WHERE status = 'pending' AND lease_expires_at > ${NOW} GROUP BY endpoint_id
), chosen AS (
  SELECT c.id FROM endpoints e
  LEFT JOIN in_flight f ON f.endpoint_id = e.id
  CROSS JOIN LATERAL (
    SELECT d.id, d.next_attempt_at FROM deliveries d
    WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${NOW}
      AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= ${NOW})
    ORDER BY d.next_attempt_at, d.id
    LIMIT GREATEST($3::bigint - COALESCE(f.n, 0), 0)
  ) c
  WHERE e.enabled
  ORDER BY c.next_attempt_at, c.id LIMIT $2
)
UPDATE deliveries d SET lease_holder = $1, lease_expires_at = ${NOW} + ${ms("$4")}
FROM chosen, events ev, endpoints e
WHERE d.id = chosen.id AND ev.id = d.event_id AND e.id = d.endpoint_id
RETURNING d.id, d.tenant_id, d.endpoint_id, e.url, d.event_id, ev.body, d.attempts, d.first_attempt_at`;

const DELIVERY_COLUMNS = `id, event_id, (SELECT type FROM events WHERE events.id = deliveries.event_id) AS event_type,
  status, created_at, next_attempt_at`;
const DELIVERIES_PAGE = new KeysetPageQuery({
  select: `SELECT ${DELIVERY_COLUMNS} FROM deliveries`,
  where: "endpoint_id = $1",
  order: "newest first",
});

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  status: DeliveryRecord["status"];
  created_at: Date;
  next_attempt_at: Date;
}

interface AttemptRow {
  delivery_id: string;
  attempted_at: Date;
  status: number | null;
  latency_ms: number;
  excerpt: string;
  error: string;
}

export class SqlDeliveriesStore implements DeliveriesStore {
  constructor(private readonly db: SqlDatabase) {}

  async listDeliveries(
    endpointId: string,
    after: { createdAt: Date; id: string } | undefined,
    limit: number,
  ): Promise<DeliveryRecord[]> {
    return this.withAttempts(await DELIVERIES_PAGE.rows<DeliveryRow>(this.db, [endpointId], { after, limit }));
  }

  /** The deliveries with their attempts, oldest first: one statement for any number of them. */
  private async withAttempts(rows: DeliveryRow[]): Promise<DeliveryRecord[]> {
    if (rows.length === 0) return [];
    const attempts = await this.db.query<AttemptRow>(
      `SELECT delivery_id, attempted_at, status, latency_ms, excerpt, error FROM delivery_attempts
       WHERE delivery_id = ANY($1::text[]) ORDER BY id`,
      [rows.map((r) => r.id)],
    );
    return rows.map((r) => ({
      id: r.id,
      eventId: r.event_id,
      eventType: r.event_type,
      status: r.status,
      createdAt: r.created_at,
      nextAttemptAt: r.next_attempt_at,
      attempts: attempts.rows
        .filter((a) => a.delivery_id === r.id)
        .map((a) => ({
          attemptedAt: a.attempted_at,
          status: a.status ?? undefined,
          latencyMs: Number(a.latency_ms),
          excerpt: a.excerpt,
          error: a.error === "" ? undefined : a.error,
        })),
    }));
  }

  recordEvents(events: readonly NewEvent[], call?: CallScope): Promise<RecordedEvents> {
    return this.db.transaction(async (tx) => {
      const result = { recorded: 0, deliveries: 0 };
      // A batch's events mostly share a tenant and a type: their endpoints are looked up once.
      const endpointsFor = new Map<string, { id: string }[]>();
      for (const event of events) {
        const inserted = await tx.query(
          `INSERT INTO events (id, tenant_id, type, body, occurred_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
          [event.id, event.tenantId, event.type, event.body, event.occurredAt],
        );
        if (inserted.rowCount !== 1) continue;
        result.recorded++;
        const key = `${event.tenantId}\n${event.type}`;
        let endpoints = endpointsFor.get(key);
        if (!endpoints) {
          ({ rows: endpoints } = await tx.query<{ id: string }>(
            `SELECT id FROM endpoints WHERE tenant_id = $1 AND enabled AND $2 = ANY (event_types)`,
            [event.tenantId, event.type],
          ));
          endpointsFor.set(key, endpoints);
        }
        for (const endpoint of endpoints) {
          await tx.query(`INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id) VALUES ($1, $2, $3, $4)`, [
            newId("whd"),
            event.tenantId,
            endpoint.id,
            event.id,
          ]);
          result.deliveries++;
        }
      }
      return result;
    }, call);
  }

  recordEventFor(endpointId: string, event: NewEvent, call?: CallScope): Promise<DeliveryRecord> {
    return this.db.transaction(async (tx) => {
      await tx.query(`INSERT INTO events (id, tenant_id, type, body, occurred_at) VALUES ($1, $2, $3, $4, $5)`, [
        event.id,
        event.tenantId,
        event.type,
        event.body,
        event.occurredAt,
      ]);
      const { rows } = await tx.query<DeliveryRow>(
        `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id) VALUES ($1, $2, $3, $4)
         RETURNING id, event_id, $5::text AS event_type, status, created_at, next_attempt_at`,
        [newId("whd"), event.tenantId, endpointId, event.id, event.type],
      );
      const r = rows[0]!;
      return {
        id: r.id,
        eventId: r.event_id,
        eventType: r.event_type,
        status: r.status,
        createdAt: r.created_at,
        nextAttemptAt: r.next_attempt_at,
        attempts: [],
      };
    }, call);
  }

  async redeliver(endpointId: string, deliveryId: string): Promise<DeliveryRecord | undefined> {
    const { rows } = await this.db.query<DeliveryRow>(
      `UPDATE deliveries SET status = 'pending', next_attempt_at = ${NOW}, first_attempt_at = NULL,
         lease_holder = NULL, lease_expires_at = NULL
       WHERE id = $1 AND endpoint_id = $2
       RETURNING ${DELIVERY_COLUMNS}`,
      [deliveryId, endpointId],
    );
    return (await this.withAttempts(rows))[0];
  }

  claimDue(holder: string, options: { limit: number; perEndpoint: number; leaseMs: number }) {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
        `switchyard.webhooks.claim.${this.db.schema}`,
      ]);
      const { rows } = await tx.query<ClaimedRow>(CLAIM, [holder, options.limit, options.perEndpoint, options.leaseMs]);
      return rows.map((r): ClaimedDelivery => ({
        id: r.id,
        tenantId: r.tenant_id,
        endpointId: r.endpoint_id,
        url: r.url,
        eventId: r.event_id,
        body: r.body,
        attempts: Number(r.attempts),
        firstAttemptAt: r.first_attempt_at ?? undefined,
      }));
    });
  }

  finishAttempt(delivery: ClaimedDelivery, holder: string, attempt: AttemptRecord, verdict: AttemptVerdict) {
    return this.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO delivery_attempts (delivery_id, attempted_at, status, latency_ms, excerpt, error) VALUES ($1, $2, $3, $4, $5, $6)`,
        [
          delivery.id,
          attempt.attemptedAt,
          attempt.status ?? null,
          attempt.latencyMs,
          attempt.excerpt,
          attempt.error ?? "",
        ],
      );
      const status = verdict.kind === "retry" ? "pending" : verdict.kind;
      const changed = await tx.query(
        `UPDATE deliveries SET status = $3, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, $4),
           last_attempt_at = $4, next_attempt_at = COALESCE($5, next_attempt_at), lease_holder = NULL, lease_expires_at = NULL
         WHERE id = $1 AND lease_holder = $2 AND status = 'pending'`,
        [delivery.id, holder, status, attempt.attemptedAt, verdict.kind === "retry" ? verdict.at : null],
      );
      if (changed.rowCount !== 1 || verdict.kind !== "failed") return { endpointDisabled: false };
      // Nothing delivered to it for that long, and this one failed for good: the endpoint is disabled, saying why.
      const disabled = await tx.query(
        `UPDATE endpoints SET enabled = false, disabled_reason = $2, updated_at = date_trunc('milliseconds', ${NOW})
         WHERE id = $1 AND enabled AND created_at < ${NOW} - ${ms("$3")}
           AND NOT EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = $1 AND status = 'delivered'
                             AND last_attempt_at > ${NOW} - ${ms("$3")})`,
        [
          delivery.endpointId,
          `every delivery failed for ${spoken(verdict.disableAfterMs)}; enable it again once it answers`,
          verdict.disableAfterMs,
        ],
      );
      return { endpointDisabled: disabled.rowCount === 1 };
    });
  }
}

/** A give-up period as the endpoint's reason says it: in hours (72), or seconds when shorter (the tests' schedules). */
function spoken(ms: number): string {
  return ms >= 3_600_000 ? `${Math.round(ms / 3_600_000)} hours` : `${Math.round(ms / 1000)} s`;
}

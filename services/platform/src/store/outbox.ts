// Events for partners (webhooks), kept in the producing service's own schema and written in the same
// transaction as the change they report (a transactional outbox): a change that commits always has
// its event, one that is rolled back — by an error, or a process killed before COMMIT — never does.
// An event holds the changed resource as the service's proto message (encoded): the public v2 JSON
// is rendered from it where the event leaves the mesh, by the code that renders the API's answers.
// Appending one also NOTIFYs the schema's outbox channel, delivered when (and only if) the transaction
// commits: the relay wakes on it instead of polling.
import { newId } from "../ids.js";
import type { SqlExecutor } from "./engine.js";

/** Include in a service's migrations to use `appendEvent`. */
export const OUTBOX_TABLE_SQL = `
CREATE TABLE outbox_events (
  id          text        PRIMARY KEY,
  position    bigserial   NOT NULL,
  tenant_id   text        NOT NULL,
  type        text        NOT NULL,
  resource    bytea       NOT NULL,
  occurred_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  relayed_at  timestamptz
);
CREATE INDEX outbox_events_unrelayed ON outbox_events (position) WHERE relayed_at IS NULL;
`;

/** An event as its producer states it. */
export interface NewEvent {
  /** e.g. "payment.succeeded". */
  type: string;
  tenantId: string;
  /** The resource as it is after the change: its proto message, encoded (toBinary). */
  resource: Uint8Array;
}

export interface OutboxEvent extends NewEvent {
  /** evt_…: receivers deduplicate by it. */
  id: string;
  occurredAt: Date;
}

interface EventRow {
  id: string;
  tenant_id: string;
  type: string;
  resource: Uint8Array;
  occurred_at: Date;
}

const EVENT_COLUMNS = "id, tenant_id, type, resource, occurred_at";

const toEvent = (r: EventRow): OutboxEvent => ({
  id: r.id,
  tenantId: r.tenant_id,
  type: r.type,
  resource: new Uint8Array(r.resource),
  occurredAt: r.occurred_at,
});

const OUTBOX_CHANNEL_SUFFIX = "_outbox";
/** The channel `appendEvent` notifies in `schema` (the service's: its search_path). */
export const outboxChannel = (schema: string): string => `${schema}${OUTBOX_CHANNEL_SUFFIX}`;

/**
 * Records an event on `tx`: the transaction that makes the change it reports. The NOTIFY rides in the
 * same statement (no extra round trip); PostgreSQL folds a transaction's identical ones into one.
 */
export async function appendEvent(tx: SqlExecutor, event: NewEvent): Promise<OutboxEvent> {
  const { rows } = await tx.query<EventRow>(
    `WITH appended AS (
       INSERT INTO outbox_events (id, tenant_id, type, resource) VALUES ($1, $2, $3, $4) RETURNING ${EVENT_COLUMNS}
     )
     SELECT ${EVENT_COLUMNS}, pg_notify(current_schema() || '${OUTBOX_CHANNEL_SUFFIX}', '')::text AS notified FROM appended`,
    [newId("evt"), event.tenantId, event.type, event.resource],
  );
  return toEvent(rows[0]!);
}

/** Events not relayed yet, oldest first (in the order they were appended). */
export async function unrelayedEvents(db: SqlExecutor, limit: number): Promise<OutboxEvent[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM outbox_events WHERE relayed_at IS NULL ORDER BY position LIMIT $1`,
    [limit],
  );
  return rows.map(toEvent);
}

/** Marks events handed on; marking one twice changes nothing (relaying is at least once). */
export async function markEventsRelayed(db: SqlExecutor, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(
    `UPDATE outbox_events SET relayed_at = clock_timestamp() WHERE id = ANY($1::text[]) AND relayed_at IS NULL`,
    [[...ids]],
  );
}

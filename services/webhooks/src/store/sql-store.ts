// WebhooksStore on the PostgreSQL-family adapter. Secrets are sealed before they are written and
// opened after they are read (SecretBox): in the database — endpoints and the stored answer of a
// creation's Idempotency-Key alike — they are never in the clear when a key is configured.
import {
  KeysetPageQuery,
  jsonResultCodec,
  runIdempotent,
  type KeyedRequest,
  type ResultCodec,
  type SqlDatabase,
} from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { EventType } from "../domain/endpoints.js";
import type { SecretBox } from "../endpoint-secrets.js";
import type {
  CreatedEndpoint,
  EndpointChange,
  EndpointRecord,
  NewEndpoint,
  SigningSecrets,
  WebhooksStore,
} from "./port.js";

interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  event_types: string[];
  enabled: boolean;
  disabled_reason: string;
  created_at: Date;
  updated_at: Date;
  previous_secret_expires_at: Date | null;
}

const ENDPOINT_COLUMNS = `id, tenant_id, url, event_types, enabled, disabled_reason, created_at, updated_at,
  CASE WHEN previous_secret_expires_at > clock_timestamp() THEN previous_secret_expires_at END AS previous_secret_expires_at`;
const NOW = "date_trunc('milliseconds', clock_timestamp())";
const CREATE_ENDPOINT = "endpoints.create";
/** What a creation's stored answer is bound to when sealed: it opens as nothing else. */
const CREATED_ANSWER = "endpoints.create:answer";
const ENDPOINTS_PAGE = new KeysetPageQuery({
  select: `SELECT ${ENDPOINT_COLUMNS} FROM endpoints`,
  where: "tenant_id = $1",
  order: "newest first",
});

const toEndpoint = (r: EndpointRow): EndpointRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  url: r.url,
  eventTypes: r.event_types as EventType[],
  enabled: r.enabled,
  disabledReason: r.disabled_reason,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  previousSecretExpiresAt: r.previous_secret_expires_at ?? undefined,
});

/** The creation's answer holds the secret: stored sealed like the endpoint's own. */
function sealedCodec(box: SecretBox): ResultCodec<CreatedEndpoint> {
  const json = jsonResultCodec<CreatedEndpoint>();
  return {
    encode: (value) => new TextEncoder().encode(box.seal(new TextDecoder().decode(json.encode(value)), CREATED_ANSWER)),
    decode: (bytes) => json.decode(new TextEncoder().encode(box.open(new TextDecoder().decode(bytes), CREATED_ANSWER))),
  };
}

export class SqlWebhooksStore implements WebhooksStore {
  private readonly createdCodec: ResultCodec<CreatedEndpoint>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly secrets: SecretBox,
  ) {
    this.createdCodec = sealedCodec(secrets);
  }

  createEndpoint(tenantId: string, idempotency: KeyedRequest<CreatedEndpoint>, endpoint: NewEndpoint) {
    return runIdempotent(
      this.db,
      { tenantId, operation: CREATE_ENDPOINT, ...idempotency },
      this.createdCodec,
      async (tx) => {
        const id = newId("we");
        const { rows } = await tx.query<EndpointRow>(
          `INSERT INTO endpoints (id, tenant_id, url, event_types, secret) VALUES ($1, $2, $3, $4, $5) RETURNING ${ENDPOINT_COLUMNS}`,
          [id, tenantId, endpoint.url, endpoint.eventTypes, this.secrets.seal(endpoint.secret, id)],
        );
        return { endpoint: toEndpoint(rows[0]!), secret: endpoint.secret };
      },
    );
  }

  async getEndpoint(tenantId: string, id: string): Promise<EndpointRecord | undefined> {
    const { rows } = await this.db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async listEndpoints(tenantId: string, after: Keyset | undefined, limit: number): Promise<EndpointRecord[]> {
    const rows = await ENDPOINTS_PAGE.rows<EndpointRow>(this.db, [tenantId], { after, limit });
    return rows.map(toEndpoint);
  }

  async updateEndpoint(tenantId: string, id: string, change: EndpointChange): Promise<EndpointRecord | undefined> {
    const { rows } = await this.db.query<EndpointRow>(
      `UPDATE endpoints SET
         url = COALESCE($3, url),
         event_types = COALESCE($4, event_types),
         enabled = COALESCE($5, enabled),
         disabled_reason = CASE WHEN $5 THEN '' ELSE disabled_reason END,
         updated_at = ${NOW}
       WHERE id = $1 AND tenant_id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [id, tenantId, change.url ?? null, change.eventTypes ?? null, change.enabled ?? null],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async deleteEndpoint(tenantId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query(`DELETE FROM endpoints WHERE id = $1 AND tenant_id = $2`, [id, tenantId]);
    return rowCount === 1;
  }

  async rotateSecret(
    tenantId: string,
    id: string,
    secret: string,
    previousValidMs: number,
  ): Promise<EndpointRecord | undefined> {
    // The current secret becomes the previous one (one before it, if still signing, stops now).
    const { rows } = await this.db.query<EndpointRow>(
      `UPDATE endpoints SET previous_secret = secret, secret = $3,
         previous_secret_expires_at = ${NOW} + $4::bigint * interval '1 millisecond', updated_at = ${NOW}
       WHERE id = $1 AND tenant_id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [id, tenantId, this.secrets.seal(secret, id), previousValidMs],
    );
    return rows[0] && toEndpoint(rows[0]);
  }

  async signingSecrets(tenantId: string, id: string): Promise<SigningSecrets | undefined> {
    const { rows } = await this.db.query<{ secret: string; previous_secret: string | null }>(
      `SELECT secret, CASE WHEN previous_secret_expires_at > clock_timestamp() THEN previous_secret END AS previous_secret
       FROM endpoints WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    const row = rows[0];
    if (!row) return undefined;
    return {
      current: this.secrets.open(row.secret, id),
      previous: row.previous_secret === null ? undefined : this.secrets.open(row.previous_secret, id),
    };
  }
}

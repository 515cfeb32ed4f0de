// IdentityStore on the PostgreSQL-family adapter (PGlite or a PostgreSQL server).
import { DomainError } from "@switchyard/platform/domain-error.js";
import type { Role } from "@switchyard/platform/caller.js";
import { KeysetPageQuery, type SqlDatabase, type SqlExecutor } from "@switchyard/platform/store";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";
import type {
  IdentityStore,
  RevocationRecord,
  SessionRecord,
  SigningKeyChange,
  SigningKeyRecord,
  TenantRecord,
  UserRecord,
} from "./port.js";

async function readSigningKeys(db: SqlExecutor): Promise<SigningKeyRecord[]> {
  const { rows } = await db.query<{
    kid: string;
    private_jwk: string;
    public_jwk: string;
    created_at: Date;
    activates_at: Date;
  }>(
    `SELECT kid, private_jwk, public_jwk, created_at, activates_at FROM signing_keys ORDER BY activates_at DESC, kid DESC`,
  );
  return rows.map((r) => ({
    kid: r.kid,
    privateJwk: r.private_jwk,
    publicJwk: r.public_jwk,
    createdAt: r.created_at,
    activatesAt: r.activates_at,
  }));
}

interface UserRow {
  id: bigint;
  tenant_id: string;
  email: string;
  full_name: string;
  given_name: string;
  family_name: string;
  role: Role;
  password_hash: string;
  internal_risk_score: number;
  created_at: Date;
}

const USER_COLUMNS =
  "id, tenant_id, email, full_name, given_name, family_name, role, password_hash, internal_risk_score, created_at";

const USERS_PAGE = new KeysetPageQuery({
  select: `SELECT ${USER_COLUMNS} FROM users`,
  where: "tenant_id = $1 AND NOT is_deleted",
  order: "newest first",
});

const toUser = (r: UserRow): UserRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  email: r.email,
  fullName: r.full_name,
  givenName: r.given_name,
  familyName: r.family_name,
  role: r.role,
  passwordHash: r.password_hash,
  internalRiskScore: r.internal_risk_score,
  createdAt: r.created_at,
});

const toTenant = (r: { id: string; display_name: string; created_at: Date }): TenantRecord => ({
  id: r.id,
  displayName: r.display_name,
  createdAt: r.created_at,
});

const UNIQUE_VIOLATION = "23505";

type NewUserRecord = {
  tenantId: string;
  email: string;
  fullName: string;
  givenName: string;
  familyName: string;
  role: Role;
  passwordHash: string;
};

async function insertUser(db: SqlExecutor, user: NewUserRecord): Promise<UserRecord> {
  try {
    const { rows } = await db.query<UserRow>(
      `INSERT INTO users (tenant_id, email, full_name, given_name, family_name, role, password_hash) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${USER_COLUMNS}`,
      [user.tenantId, user.email, user.fullName, user.givenName, user.familyName, user.role, user.passwordHash],
    );
    return toUser(rows[0]!);
  } catch (err) {
    if ((err as { code?: string }).code === UNIQUE_VIOLATION)
      throw new DomainError("ALREADY_EXISTS", "a user with this email already exists in the tenant", {
        field: "email",
      });
    throw err;
  }
}

export class SqlIdentityStore implements IdentityStore {
  private readonly revocationsChannel: string;

  constructor(private readonly db: SqlDatabase) {
    this.revocationsChannel = `${db.schema}_revocations`;
  }

  async upsertTenant(tenant: { id: string; displayName: string }): Promise<TenantRecord> {
    const { rows } = await this.db.query<{ id: string; display_name: string; created_at: Date }>(
      `INSERT INTO tenants (id, display_name) VALUES ($1, $2)
       ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name
       RETURNING id, display_name, created_at`,
      [tenant.id, tenant.displayName],
    );
    return toTenant(rows[0]!);
  }

  async getTenant(id: string): Promise<TenantRecord | undefined> {
    const { rows } = await this.db.query<{ id: string; display_name: string; created_at: Date }>(
      `SELECT id, display_name, created_at FROM tenants WHERE id = $1`,
      [id],
    );
    return rows[0] && toTenant(rows[0]);
  }

  async findUserByEmail(tenantId: string, email: string): Promise<UserRecord | undefined> {
    const { rows } = await this.db.query<UserRow>(
      `SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND lower(email) = lower($2) AND NOT is_deleted`,
      [tenantId, email],
    );
    return rows[0] && toUser(rows[0]);
  }

  async getUser(tenantId: string, id: bigint): Promise<UserRecord | undefined> {
    const { rows } = await this.db.query<UserRow>(
      `SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2 AND NOT is_deleted`,
      [tenantId, id],
    );
    return rows[0] && toUser(rows[0]);
  }

  async listUsers(tenantId: string, after: Keyset | undefined, limit: number): Promise<UserRecord[]> {
    const rows = await USERS_PAGE.rows<UserRow>(this.db, [tenantId], { after, limit });
    return rows.map(toUser);
  }

  createUser(user: NewUserRecord): Promise<UserRecord> {
    return insertUser(this.db, user);
  }

  createTenantWithAdmin(
    tenant: { id: string; displayName: string },
    admin: { email: string; fullName: string; givenName: string; familyName: string; passwordHash: string },
    call?: CallScope,
  ): Promise<{ tenant: TenantRecord; admin: UserRecord }> {
    return this.db.transaction(async (tx) => {
      // A tenant made at the same moment by another call: this insert waits for it, then inserts nothing.
      const { rows } = await tx.query<{ id: string; display_name: string; created_at: Date }>(
        `INSERT INTO tenants (id, display_name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING id, display_name, created_at`,
        [tenant.id, tenant.displayName],
      );
      if (!rows[0])
        throw new DomainError("ALREADY_EXISTS", `tenant "${tenant.id}" already exists`, { field: "tenant_id" });
      return {
        tenant: toTenant(rows[0]),
        admin: await insertUser(tx, { tenantId: tenant.id, role: "admin", ...admin }),
      };
    }, call);
  }

  async updatePasswordHash(tenantId: string, id: bigint, passwordHash: string): Promise<void> {
    await this.db.query(`UPDATE users SET password_hash = $3 WHERE tenant_id = $1 AND id = $2 AND NOT is_deleted`, [
      tenantId,
      id,
      passwordHash,
    ]);
  }

  deleteUser(tenantId: string, id: bigint, call?: CallScope): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query(
        `UPDATE users SET is_deleted = true, deleted_at = now() WHERE tenant_id = $1 AND id = $2 AND NOT is_deleted`,
        [tenantId, id],
      );
      if (rowCount !== 1) return false;
      // Every token of the user stops working everywhere, not only here.
      const revoked = await tx.query<{ id: string; expires_at: Date }>(
        `UPDATE sessions SET revoked_at = now() WHERE tenant_id = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now() RETURNING id, expires_at`,
        [tenantId, id],
      );
      for (const r of revoked.rows) await this.announce(tx, { sessionId: r.id, expiresAt: r.expires_at });
      return true;
    }, call);
  }

  revokeSession(tenantId: string, id: string, call?: CallScope): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string; expires_at: Date }>(
        `UPDATE sessions SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING id, expires_at`,
        [tenantId, id],
      );
      if (!rows[0]) return false;
      await this.announce(tx, { sessionId: rows[0].id, expiresAt: rows[0].expires_at });
      return true;
    }, call);
  }

  /** Delivered to every listener when the transaction commits, never before. */
  private async announce(tx: SqlExecutor, revocation: RevocationRecord): Promise<void> {
    await tx.query(`SELECT pg_notify($1, $2)`, [
      this.revocationsChannel,
      JSON.stringify({ s: revocation.sessionId, e: revocation.expiresAt.getTime() }),
    ]);
  }

  async liveRevocations(): Promise<RevocationRecord[]> {
    const { rows } = await this.db.query<{ id: string; expires_at: Date }>(
      `SELECT id, expires_at FROM sessions WHERE revoked_at IS NOT NULL AND expires_at > now()`,
    );
    return rows.map((r) => ({ sessionId: r.id, expiresAt: r.expires_at }));
  }

  watchRevocations(
    onRevoked: (revocation: RevocationRecord) => void,
    onResync: () => void,
  ): Promise<() => Promise<void>> {
    return this.db.listen(
      this.revocationsChannel,
      (payload) => {
        try {
          const { s, e } = JSON.parse(payload) as { s: unknown; e: unknown };
          if (typeof s === "string" && typeof e === "number") onRevoked({ sessionId: s, expiresAt: new Date(e) });
        } catch {
          // Not ours: ignore.
        }
      },
      onResync,
    );
  }

  async recordSession(session: { id: string; tenantId: string; userId: bigint; expiresAt: Date }): Promise<void> {
    await this.db.query(`INSERT INTO sessions (id, tenant_id, user_id, expires_at) VALUES ($1, $2, $3, $4)`, [
      session.id,
      session.tenantId,
      session.userId,
      session.expiresAt,
    ]);
  }

  async getSession(tenantId: string, id: string): Promise<SessionRecord | undefined> {
    const { rows } = await this.db.query<{
      id: string;
      tenant_id: string;
      user_id: bigint;
      created_at: Date;
      expires_at: Date;
    }>(`SELECT id, tenant_id, user_id, created_at, expires_at FROM sessions WHERE id = $1 AND tenant_id = $2`, [
      id,
      tenantId,
    ]);
    const r = rows[0];
    return (
      r && { id: r.id, tenantId: r.tenant_id, userId: r.user_id, createdAt: r.created_at, expiresAt: r.expires_at }
    );
  }

  async signingKeys(): Promise<SigningKeyRecord[]> {
    return readSigningKeys(this.db);
  }

  changeSigningKeys(
    decide: (keys: SigningKeyRecord[]) => Promise<SigningKeyChange> | SigningKeyChange,
  ): Promise<SigningKeyRecord[]> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`${this.db.schema}.signing_keys`]);
      const change = await decide(await readSigningKeys(tx));
      if (change.add) {
        const { kid, privateJwk, publicJwk, activatesAt } = change.add;
        await tx.query(
          `INSERT INTO signing_keys (kid, private_jwk, public_jwk, activates_at) VALUES ($1, $2, $3, $4)`,
          [kid, privateJwk, publicJwk, activatesAt],
        );
      }
      if (change.remove?.length)
        await tx.query(`DELETE FROM signing_keys WHERE kid = ANY($1::text[])`, [change.remove]);
      for (const { kid, privateJwk } of change.reseal ?? [])
        await tx.query(`UPDATE signing_keys SET private_jwk = $2 WHERE kid = $1`, [kid, privateJwk]);
      return readSigningKeys(tx);
    });
  }
}

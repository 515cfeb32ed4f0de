import type { Migration } from "@switchyard/platform/store";

// Never edit a migration that has shipped: add the next version.
export const identityMigrations: Migration[] = [
  {
    version: 1,
    name: "tenants, users, sessions, signing keys",
    sql: `
CREATE TABLE tenants (
  id           text PRIMARY KEY,
  display_name text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE TABLE users (
  id                  bigserial PRIMARY KEY,
  tenant_id           text NOT NULL REFERENCES tenants (id),
  email               text NOT NULL,
  full_name           text NOT NULL,
  role                text NOT NULL CHECK (role IN ('admin', 'member')),
  password_hash       text NOT NULL,
  internal_risk_score integer NOT NULL DEFAULT 0,
  is_deleted          boolean NOT NULL DEFAULT false,
  deleted_at          timestamptz,
  created_at          timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE UNIQUE INDEX users_active_email ON users (tenant_id, lower(email)) WHERE NOT is_deleted;
CREATE INDEX users_active_by_created ON users (tenant_id, created_at DESC, id DESC) WHERE NOT is_deleted;
CREATE TABLE sessions (
  id         text PRIMARY KEY,
  tenant_id  text NOT NULL,
  user_id    bigint NOT NULL REFERENCES users (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE TABLE signing_keys (
  kid         text PRIMARY KEY,
  private_jwk text NOT NULL,
  public_jwk  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
`,
  },
  {
    version: 2,
    name: "revoked sessions",
    sql: `
ALTER TABLE sessions ADD COLUMN revoked_at timestamptz;
CREATE INDEX sessions_revoked_live ON sessions (expires_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX sessions_by_user ON sessions (tenant_id, user_id);`,
  },
  {
    version: 3,
    name: "signing keys that rotate: when each starts signing",
    sql: `
ALTER TABLE signing_keys ADD COLUMN activates_at timestamptz;
UPDATE signing_keys SET activates_at = created_at;
ALTER TABLE signing_keys ALTER COLUMN activates_at SET NOT NULL;`,
  },
  {
    version: 4,
    name: "users' names in parts (given, family) beside the whole name",
    // Users made before have their whole name as the given name: where it splits is not known.
    sql: `
ALTER TABLE users ADD COLUMN given_name text NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN family_name text NOT NULL DEFAULT '';
UPDATE users SET given_name = full_name;`,
  },
];

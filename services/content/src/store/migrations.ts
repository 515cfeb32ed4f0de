import { IDEMPOTENCY_PRINCIPAL_SQL, IDEMPOTENCY_TABLE_SQL, type Migration } from "@switchyard/platform/store";

// Never edit a migration that has shipped: add the next version.
export const contentMigrations: Migration[] = [
  {
    version: 1,
    name: "documents, posts, catalog",
    sql: `
CREATE TABLE documents (
  id         text PRIMARY KEY,
  tenant_id  text NOT NULL,
  title      text NOT NULL,
  body       text NOT NULL,
  version    integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  updated_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE TABLE posts (
  id         text PRIMARY KEY,
  tenant_id  text NOT NULL,
  author_id  bigint NOT NULL,
  title      text NOT NULL,
  body       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX posts_by_created ON posts (tenant_id, created_at DESC, id DESC);
CREATE TABLE catalog_items (
  sku        text PRIMARY KEY,
  name       text NOT NULL,
  price      bigint NOT NULL CHECK (price >= 0),
  currency   text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
`,
  },
  {
    version: 2,
    name: "catalog import jobs, idempotency keys",
    sql: `
CREATE TABLE import_jobs (
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL,
  created_by       bigint NOT NULL,
  status           text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  received         integer NOT NULL CHECK (received > 0),
  imported         integer NOT NULL DEFAULT 0,
  failed           integer NOT NULL DEFAULT 0,
  -- The position (from 0) of the next line to run: lines before it are done, with their effects.
  next_position    integer NOT NULL DEFAULT 0,
  -- How often a runner was lost while running it (its lease ran out): after three, the job fails.
  interruptions    integer NOT NULL DEFAULT 0,
  lease_owner      text,
  lease_until      timestamptz,
  failure_message  text,
  created_at       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  updated_at       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX import_jobs_runnable ON import_jobs (created_at, id) WHERE status IN ('queued', 'running');
-- A job's lines until it has run them: the encoded ImportItemsRequest of each item, or its problem.
CREATE TABLE import_job_lines (
  job_id          text NOT NULL REFERENCES import_jobs (id) ON DELETE CASCADE,
  position        integer NOT NULL,
  line            integer NOT NULL,
  request         bytea,
  problem_code    text,
  problem_message text,
  PRIMARY KEY (job_id, position),
  CHECK ((request IS NULL) <> (problem_code IS NULL))
);
-- The first per-line errors of each job (at most 100).
CREATE TABLE import_job_errors (
  job_id  text NOT NULL REFERENCES import_jobs (id) ON DELETE CASCADE,
  line    integer NOT NULL,
  code    text NOT NULL,
  message text NOT NULL,
  PRIMARY KEY (job_id, line)
);
${IDEMPOTENCY_TABLE_SQL}`,
  },
  {
    version: 3,
    name: "idempotency keys scoped by principal",
    sql: IDEMPOTENCY_PRINCIPAL_SQL,
  },
  {
    version: 4,
    name: "cache change log and cache leases",
    sql: `
-- Every change of data an edge cache holds (catalog items, documents), written in the transaction of
-- the change under one advisory lock, so positions increase in commit order (cache-changes.ts).
CREATE TABLE cache_changes (
  position   bigserial PRIMARY KEY,
  kind       text NOT NULL CHECK (kind IN ('catalog', 'document')),
  tenant_id  text NOT NULL DEFAULT '',
  id         text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Each live edge cache: how far it has applied the log, and until when it may serve from memory.
CREATE TABLE cache_subscribers (
  id               text PRIMARY KEY,
  applied_position bigint NOT NULL,
  lease_until      timestamptz NOT NULL
);
CREATE INDEX cache_subscribers_live ON cache_subscribers (lease_until);
`,
  },
];

import type { Migration } from "@switchyard/platform/store";

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
];

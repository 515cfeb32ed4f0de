// A PostgreSQL server for a benchmark mesh: each service in a fresh schema of its own (dropped at the
// end), the demo data forced onto it (npm start refuses to seed a server otherwise), and a key to
// encrypt identity's signing keys with — what a deployment sets, generated for the run.
import { randomBytes } from "node:crypto";
import pg from "pg";

const SCHEMA_SERVICES = ["identity", "payments", "orders", "content"] as const;

export interface ServerSchemas {
  /** The environment of a mesh on those schemas. */
  env: NodeJS.ProcessEnv;
  drop(): Promise<void>;
}

export function serverSchemas(databaseUrl: string, label: string): ServerSchemas {
  const suffix = randomBytes(4).toString("hex");
  const env: NodeJS.ProcessEnv = {
    DATABASE_URL: databaseUrl,
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    DEMO_DATA_FORCE: "true",
  };
  const schemas: string[] = [];
  for (const name of SCHEMA_SERVICES) {
    const schema = `${name}_${label}_${suffix}`;
    env[`${name.toUpperCase()}_DB_SCHEMA`] = schema;
    schemas.push(schema);
  }
  return {
    env,
    async drop() {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

// The one config loader: every process describes its settings once, reads them from the
// environment once in its entrypoint, and refuses to start with a list of every problem.

/** Reads one raw value; `env` is the whole environment, for the rare setting that depends on another. */
type Parser<T> = (raw: string, env?: NodeJS.ProcessEnv) => T;

export interface Setting<T> {
  readonly env: string;
  readonly parse: Parser<T>;
  readonly fallback?: T;
  readonly optional?: boolean;
  readonly doc: string;
}

type Spec = Record<string, Setting<unknown>>;
export type ConfigOf<S extends Spec> = {
  [K in keyof S]: S[K] extends Setting<infer T> ? (S[K]["optional"] extends true ? T | undefined : T) : never;
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
  }
}

export const parse = {
  string: (raw: string) => raw,
  int:
    (min: number, max: number): Parser<number> =>
    (raw) => {
      if (!/^-?\d+$/.test(raw)) throw new Error(`expected an integer, got "${raw}"`);
      const n = Number(raw);
      if (n < min || n > max) throw new Error(`expected ${min}..${max}, got ${n}`);
      return n;
    },
  port: (raw: string) => parse.int(0, 65535)(raw),
  bool: (raw: string) => {
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    throw new Error(`expected true or false, got "${raw}"`);
  },
  oneOf:
    <T extends string>(...values: T[]): Parser<T> =>
    (raw) => {
      if (!(values as string[]).includes(raw)) throw new Error(`expected one of ${values.join(", ")}, got "${raw}"`);
      return raw as T;
    },
  url:
    (...protocols: string[]): Parser<string> =>
    (raw) => {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        throw new Error("expected a URL");
      }
      if (protocols.length > 0 && !protocols.includes(url.protocol))
        throw new Error(`expected a ${protocols.join(" or ")} URL`);
      return raw;
    },
  matching:
    (pattern: RegExp, what: string): Parser<string> =>
    (raw) => {
      if (!pattern.test(raw)) throw new Error(`expected ${what}, got "${raw}"`);
      return raw;
    },
  /** Like `matching`, for a secret: the refusal never repeats the value. */
  secretMatching:
    (pattern: RegExp, what: string): Parser<string> =>
    (raw) => {
      if (!pattern.test(raw)) throw new Error(`expected ${what} (the value is not shown)`);
      return raw;
    },
  /** A lower-case SQL identifier (schema names). */
  identifier: (raw: string) => {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(raw)) throw new Error(`expected a lower-case identifier, got "${raw}"`);
    return raw;
  },
  /**
   * A gRPC peer as grpc-js names targets: `host:port`, `dns:///host:port` (every address the name
   * resolves to, balanced round robin: a headless Service) or a static list `ipv4:h:p,h:p`.
   */
  address: (raw: string) => {
    const hostPort = String.raw`(?:[\w.-]+|\[[\da-f:]+\]):\d{1,5}`;
    const ipv4 = String.raw`\d{1,3}(?:\.\d{1,3}){3}:\d{1,5}`;
    const forms = new RegExp(`^(?:${hostPort}|dns:(?:///)?${hostPort}|ipv4:${ipv4}(?:,${ipv4})*)$`, "i");
    if (!forms.test(raw))
      throw new Error(`expected host:port, dns:///host:port or ipv4:host:port[,host:port…], got "${raw}"`);
    return raw;
  },
};

export function setting<T>(env: string, parser: Parser<T>, doc: string, fallback?: T): Setting<T> {
  return fallback === undefined ? { env, parse: parser, doc } : { env, parse: parser, doc, fallback };
}

export function optionalSetting<T>(env: string, parser: Parser<T>, doc: string): Setting<T> & { optional: true } {
  return { env, parse: parser, doc, optional: true };
}

export function loadConfig<S extends Spec>(spec: S, env: NodeJS.ProcessEnv): ConfigOf<S> {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(spec)) {
    const raw = env[s.env];
    if (raw === undefined || raw === "") {
      if (s.fallback !== undefined) out[key] = s.fallback;
      else if (!s.optional) problems.push(`${s.env} is required (${s.doc})`);
      continue;
    }
    try {
      out[key] = s.parse(raw, env);
    } catch (err) {
      problems.push(`${s.env}: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out as ConfigOf<S>;
}

/**
 * OpenTelemetry's standard endpoint variable, validated at start like any setting (the SDK reads it, and
 * the other OTEL_* variables, itself): set, spans are exported with OTLP over HTTP; unset, no tracing.
 */
export const otlpEndpointSetting = optionalSetting(
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  parse.url("http:", "https:"),
  "OTLP/HTTP collector the spans are exported to (<endpoint>/v1/traces); unset = no tracing",
);

/**
 * What every gRPC server holds its callers to beyond authentication (server.ts): who may list its
 * methods, how often a connection may ping, how many calls one connection may run at once, and how
 * long a call that answers once may take.
 */
export const grpcServerHardeningSettings = {
  reflection: setting(
    "GRPC_REFLECTION",
    parse.bool,
    "serve gRPC server reflection (the list of every service and method, for grpcurl and buf curl); npm start turns it on, deploy/ leaves it off",
    false,
  ),
  minPingIntervalMs: setting(
    "GRPC_MIN_PING_INTERVAL_WITHOUT_DATA_MS",
    parse.int(0, 86_400_000),
    "a client ping sooner than this after the previous one, with nothing sent to it in between, is a strike; 0 = pings are never policed",
    10_000,
  ),
  maxPingStrikes: setting(
    "GRPC_MAX_PING_STRIKES",
    parse.int(0, 1_000),
    "strikes a connection may have before it is sent GOAWAY ENHANCE_YOUR_CALM (too_many_pings) and closed",
    2,
  ),
  maxConcurrentStreams: setting(
    "GRPC_MAX_CONCURRENT_STREAMS",
    parse.int(1, 1_000_000),
    "calls one client connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); more wait in the client",
    1_000,
  ),
  defaultDeadlineMs: setting(
    "GRPC_DEFAULT_DEADLINE_MS",
    parse.int(1, 3_600_000),
    "the deadline of a unary or client-streaming call that was sent without one, at most GRPC_MAX_DEADLINE_MS (streams that answer as they go have none)",
    30_000,
  ),
  maxDeadlineMs: setting(
    "GRPC_MAX_DEADLINE_MS",
    parse.int(1, 86_400_000),
    "the longest deadline a unary or client-streaming call may ask for; a longer one is cut to this (streams that answer as they go are exempt)",
    300_000,
  ),
};

const TLS_FILES = ["GRPC_TLS_CERT_FILE", "GRPC_TLS_KEY_FILE", "GRPC_TLS_CA_FILE"] as const;

/** A file of the TLS trio, which is set whole or not at all. */
const tlsFile: Parser<string> = (raw, env) => {
  const missing = TLS_FILES.filter((name) => !env?.[name]);
  if (missing.length > 0)
    throw new Error(`set with ${TLS_FILES.join(", ")} or not at all: ${missing.join(", ")} missing`);
  return raw;
};

/**
 * Mutual TLS on the internal gRPC network (grpc/tls.ts), for every process that serves or calls it:
 * unset, plaintext (npm start, the tests); set, every server demands a client certificate from the CA
 * and every client checks the server's SPIFFE ID, with the files reloaded when they change.
 */
export const grpcTlsSettings = {
  tlsCertFile: optionalSetting(
    "GRPC_TLS_CERT_FILE",
    tlsFile,
    "this process's certificate (PEM, chain after it), whose URI SAN is spiffe://<GRPC_TLS_TRUST_DOMAIN>/<service>; with GRPC_TLS_KEY_FILE and GRPC_TLS_CA_FILE turns on mutual TLS; unset = plaintext",
  ),
  tlsKeyFile: optionalSetting("GRPC_TLS_KEY_FILE", tlsFile, "the private key of GRPC_TLS_CERT_FILE (PEM)"),
  tlsCaFile: optionalSetting(
    "GRPC_TLS_CA_FILE",
    tlsFile,
    "the CA certificates (PEM) peers' certificates must chain to, server's and client's alike",
  ),
  tlsTrustDomain: setting(
    "GRPC_TLS_TRUST_DOMAIN",
    parse.matching(/^[a-z0-9]([a-z0-9.-]{0,253}[a-z0-9])?$/, "a trust domain (lower-case DNS-like name)"),
    "the trust domain of the mesh's SPIFFE IDs: spiffe://<this>/<service>",
    "switchyard",
  ),
  tlsReloadIntervalMs: setting(
    "GRPC_TLS_RELOAD_INTERVAL_MS",
    parse.int(100, 3_600_000),
    "how often the certificate, key and CA files are read again; a changed, consistent set is used for every new connection",
    30_000,
  ),
};

/** The mesh launcher's pipe (scripts/mesh.ts, launcher.ts): every process it starts has it, no other. */
export const launcherFdSetting = optionalSetting(
  "LAUNCHER_FD",
  parse.int(3, 65_535),
  "an inherited pipe from the mesh launcher (npm start, the tests): when it ends, the launcher is gone, and the process stops as on SIGTERM",
);

/** Settings every service process has; each entrypoint adds its own. */
export function serviceSettings(prefix: string, defaultPort: number) {
  const schema = prefix.toLowerCase();
  return {
    databaseSchema: setting(`${prefix}_DB_SCHEMA`, parse.identifier, "schema the service owns in the database", schema),
    host: setting(`${prefix}_HOST`, parse.string, "interface the gRPC server binds", "127.0.0.1"),
    port: setting(`${prefix}_PORT`, parse.port, "gRPC port", defaultPort),
    logLevel: setting(
      "LOG_LEVEL",
      parse.oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
      "log level",
      "info",
    ),
    databaseUrl: optionalSetting(
      "DATABASE_URL",
      parse.url("postgres:", "postgresql:"),
      "PostgreSQL server; unset = embedded PGlite under DATA_DIR",
    ),
    databaseMigrations: setting(
      "DATABASE_MIGRATIONS",
      parse.oneOf("apply", "verify"),
      "apply = the process migrates its schema at start; verify = a migration step ran before (node dist/migrate.js): it refuses to start on a schema that lacks one of its migrations, and serves on a newer one",
      "apply",
    ),
    databasePoolMax: setting(
      "DATABASE_POOL_MAX",
      parse.int(1, 1_000),
      "most connections the process opens to a PostgreSQL server for its work (one more carries its LISTENs, where it has any): replicas × this, summed over the services, must stay within the server's max_connections",
      10,
    ),
    databaseUnreadyAfterMs: setting(
      "DATABASE_UNREADY_AFTER_MS",
      parse.int(0, 600_000),
      "how long the PostgreSQL server must fail the process's checks (every 0.5 s while failing) before its readiness turns NOT_SERVING: a blip does not empty a Service; liveness never follows the database",
      10_000,
    ),
    dataDir: setting("DATA_DIR", parse.string, "where embedded databases persist (one folder per service)", "./data"),
    drainTimeoutMs: setting(
      "SHUTDOWN_DRAIN_MS",
      parse.int(0, 600_000),
      "how long SIGTERM waits for in-flight calls",
      10_000,
    ),
    maxConnectionAgeMs: setting(
      "GRPC_MAX_CONNECTION_AGE_MS",
      parse.int(1_000, 86_400_000),
      "the server asks a client to reconnect after this long (then GRPC_MAX_CONNECTION_AGE_GRACE_MS for its calls to finish), so clients balancing over DNS find new replicas",
      300_000,
    ),
    maxConnectionAgeGraceMs: setting(
      "GRPC_MAX_CONNECTION_AGE_GRACE_MS",
      parse.int(0, 3_600_000),
      "how long calls on a connection past its age may still run",
      30_000,
    ),
    ...grpcServerHardeningSettings,
    ...grpcTlsSettings,
    healthPort: optionalSetting(
      "GRPC_HEALTH_PORT",
      parse.int(1, 65_535),
      "a plaintext port that serves grpc.health.v1 alone, beside the service port: for the kubelet's gRPC probes, which present no client certificate, when the service port requires one (mutual TLS); unset = none",
    ),
    listenFd: optionalSetting(
      "LISTEN_FD",
      parse.int(3, 65_535),
      "serve on this inherited, already listening socket instead of binding HOST:PORT (the mesh launcher hands sockets over so no other process can take a port first)",
    ),
    launcherFd: launcherFdSetting,
    otlpEndpoint: otlpEndpointSetting,
    metricsPort: setting(
      `${prefix}_METRICS_PORT`,
      parse.port,
      "port of the Prometheus metrics endpoint (GET /metrics, on the same interface as gRPC); 0 = none",
      0,
    ),
    metricsListenFd: optionalSetting(
      "METRICS_LISTEN_FD",
      parse.int(3, 65_535),
      "serve the metrics endpoint on this inherited, already listening socket instead of binding the metrics port (the mesh launcher hands it over)",
    ),
    shedEventLoopDelayMs: setting(
      "SHED_EVENT_LOOP_DELAY_MS",
      parse.int(0, 60_000),
      "shed new calls (UNAVAILABLE, LOAD_SHED) while the event loop's p99 delay exceeds this in two 0.5 s windows running; 0 = never",
      500,
    ),
  };
}

/**
 * The demo-data switch of a service that seeds it, and the override that lets it seed a database
 * server. Demo data is well-known accounts with a published password: on embedded storage it is a
 * local demo; on a PostgreSQL server it could be a real deployment's, so it is refused unless forced
 * (test meshes that seed a test server on purpose). Check with `demoDataProblems`.
 */
export function demoDataSettings(env: string, doc: string) {
  return {
    demoData: setting(env, parse.bool, doc, false),
    demoDataForce: setting(
      "DEMO_DATA_FORCE",
      parse.bool,
      "seed demo data into a PostgreSQL server (DATABASE_URL) all the same: test databases only",
      false,
    ),
  };
}

/** What is wrong with seeding demo data where this config would (nothing, or one problem). */
export function demoDataProblems(
  config: { demoData: boolean; demoDataForce: boolean; databaseUrl: string | undefined },
  env: string,
): string[] {
  if (!config.demoData || !config.databaseUrl || config.demoDataForce) return [];
  return [
    `${env}=true refuses to seed a PostgreSQL server (DATABASE_URL is set): demo accounts have a published password. Unset one of them, or set DEMO_DATA_FORCE=true for a test database`,
  ];
}

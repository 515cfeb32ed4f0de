// The metrics and spans of every statement, for both engines: its duration by SQL verb and outcome,
// and (when tracing) a span with its text — placeholders only, never its parameter values.
import { dbStatementDuration } from "../metrics.js";
import { SpanKind, SpanStatusCode, tracer, tracingEnabled } from "../tracing.js";

const VERBS = new Set([
  "SELECT",
  "INSERT",
  "UPDATE",
  "DELETE",
  "WITH",
  "BEGIN",
  "COMMIT",
  "ROLLBACK",
  "SET",
  "LISTEN",
  "UNLISTEN",
  "NOTIFY",
  "CREATE",
  "ALTER",
  "DROP",
  "LOCK",
]);
const verbCache = new Map<string, string>();
/** Statements whose verb is remembered: every one a service's code holds, not SQL built without bound. */
const VERB_CACHE_MAX = 2_000;
/** Longer statement texts are cut in a span's attribute. */
const SPAN_TEXT_MAX = 2_000;

/** The statement's SQL verb (bounded: a known one, else OTHER), as a metric label and span name. */
function verbOf(sql: string): string {
  let verb = verbCache.get(sql);
  if (verb === undefined) {
    const word = /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase() ?? "OTHER";
    verb = VERBS.has(word) ? word : "OTHER";
    if (verbCache.size < VERB_CACHE_MAX) verbCache.set(sql, verb);
  }
  return verb;
}

const statementChildren = new Map<string, { observe(v: number): void }>();
function observeStatement(verb: string, outcome: "ok" | "error", seconds: number): void {
  const key = `${verb} ${outcome}`;
  let child = statementChildren.get(key);
  if (!child) statementChildren.set(key, (child = dbStatementDuration.labels({ operation: verb, outcome })));
  child.observe(seconds);
}

/** One statement's measurement: begun before it runs, ended once with its outcome. */
export interface Measurement {
  ok(): void;
  failed(err: unknown): void;
}

/** Starts measuring one statement (its duration, and its span when tracing). */
export function beginStatement(sql: string, schema: string): Measurement {
  const verb = verbOf(sql);
  const span = tracingEnabled()
    ? tracer().startSpan(`${verb} ${schema}`, {
        kind: SpanKind.CLIENT,
        attributes: {
          "db.system.name": "postgresql",
          "db.namespace": schema,
          "db.operation.name": verb,
          "db.query.text": sql.length > SPAN_TEXT_MAX ? `${sql.slice(0, SPAN_TEXT_MAX)}…` : sql,
        },
      })
    : undefined;
  const started = performance.now();
  return {
    ok() {
      observeStatement(verb, "ok", (performance.now() - started) / 1000);
      span?.end();
    },
    failed(err) {
      observeStatement(verb, "error", (performance.now() - started) / 1000);
      if (span) {
        const code = (err as { code?: unknown }).code;
        span.setStatus({ code: SpanStatusCode.ERROR, message: typeof code === "string" ? code : "error" });
        span.end();
      }
    },
  };
}

/** Runs one statement, timed, and (when tracing) in a span with its text — placeholders, no values. */
export async function measured<T>(sql: string, schema: string, run: () => Promise<T>): Promise<T> {
  const measurement = beginStatement(sql, schema);
  try {
    const value = await run();
    measurement.ok();
    return value;
  } catch (err) {
    measurement.failed(err);
    throw err;
  }
}

/** `measured` for a statement that runs to its end synchronously (the embedded engine's). */
export function measuredSync<T>(sql: string, schema: string, run: () => T): T {
  const measurement = beginStatement(sql, schema);
  try {
    const value = run();
    measurement.ok();
    return value;
  } catch (err) {
    measurement.failed(err);
    throw err;
  }
}

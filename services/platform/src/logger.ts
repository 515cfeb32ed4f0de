// Structured JSON logs (pino). Credentials never reach a log line: the redaction list covers
// every place a token, password, hash, key or database URL could sit in a logged object. A line
// about a call carries its request id (callFields: the call's scope is handed to the work done for
// it, call-deadline.ts), and with tracing on, every line written within a span its trace id.
import { pino, type Logger } from "pino";
import type { CallScope } from "./call-deadline.js";
import { activeTraceId } from "./tracing.js";

export type { Logger };

export const REDACTED_PATHS = [
  "password",
  "*.password",
  "password_hash",
  "*.password_hash",
  "passwordHash",
  "*.passwordHash",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  "access_token",
  "*.access_token",
  "accessToken",
  "*.accessToken",
  "internal_risk_score",
  "*.internal_risk_score",
  "token",
  "*.token",
  "serviceToken",
  "*.serviceToken",
  "secret",
  "*.secret",
  "privateKey",
  "*.privateKey",
  "private_key",
  "*.private_key",
  "databaseUrl",
  "*.databaseUrl",
  "connectionString",
  "*.connectionString",
  "DATABASE_URL",
  "*.DATABASE_URL",
  '["service-authorization"]',
  '*["service-authorization"]',
];

/** The fields that tie a line to the call it is about: its request id (none for work outside a call). */
export function callFields(call: CallScope | undefined): { request_id?: string } {
  return call?.requestId === undefined ? {} : { request_id: call.requestId };
}

/** The trace a line is written in, with tracing on. */
function traceIds(): Record<string, string> {
  const traceId = activeTraceId();
  return traceId === undefined ? {} : { trace_id: traceId };
}

export function createLogger(service: string, level = "info", destination?: NodeJS.WritableStream): Logger {
  const options = {
    name: service,
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: traceIds,
  };
  return destination ? pino(options, destination as never) : pino(options);
}

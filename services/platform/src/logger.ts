// Structured JSON logs (pino). Credentials never reach a log line: the redaction list covers
// every place a token, password, hash, key or database URL could sit in a logged object. Every line
// written within a call carries its request id (and trace id, with tracing on).
import { pino, type Logger } from "pino";
import { currentRequestId } from "./call-deadline.js";
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

/** The ids of the call a line is written in: none outside a call. */
function callIds(): Record<string, string> {
  const requestId = currentRequestId();
  const traceId = activeTraceId();
  if (requestId === undefined && traceId === undefined) return {};
  const ids: Record<string, string> = {};
  if (requestId !== undefined) ids.request_id = requestId;
  if (traceId !== undefined) ids.trace_id = traceId;
  return ids;
}

export function createLogger(service: string, level = "info", destination?: NodeJS.WritableStream): Logger {
  const options = {
    name: service,
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: callIds,
  };
  return destination ? pino(options, destination as never) : pino(options);
}

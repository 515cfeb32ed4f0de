// Structured JSON logs (pino). Credentials never reach a log line: the redaction list covers
// every place a token, password or hash could sit in a logged object.
import { pino, type Logger } from "pino";

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
];

export function createLogger(service: string, level = "info", destination?: NodeJS.WritableStream): Logger {
  const options = {
    name: service,
    level,
    base: { service },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return destination ? pino(options, destination as never) : pino(options);
}

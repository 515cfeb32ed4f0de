// Opaque resource ids: a type prefix and 120 random bits (pay_…, re_…, doc_…).
import { randomBytes } from "node:crypto";

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(15).toString("base64url")}`;
}

export function isIdOf(prefix: string, id: string): boolean {
  return (
    id.length === prefix.length + 21 &&
    id.startsWith(`${prefix}_`) &&
    /^[A-Za-z0-9_-]{20}$/.test(id.slice(prefix.length + 1))
  );
}

// Rules for users, without I/O: what a valid new user is, and what the public view of one holds.
import { fail } from "@switchyard/platform/errors.js";
import type { Role } from "@switchyard/platform/caller.js";

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;
export const FULL_NAME_MAX_LENGTH = 200;
export const EMAIL_MAX_LENGTH = 254;

// Deliberately plain: one @, a dot in the domain, no spaces or control characters.
const EMAIL = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}]+\.[^\s@\p{Cc}]+$/u;
export const CONTROL_CHARACTER = /\p{Cc}/u;

export interface NewUser {
  email: string;
  fullName: string;
  password: string;
  role: Role;
}

/** Emails are compared without case; they are stored as given, trimmed. */
export function normalizeEmail(email: string): string {
  return email.trim();
}

export function validateNewUser(input: { email: string; fullName: string; password: string; role: Role | undefined }): NewUser {
  const email = normalizeEmail(input.email);
  if (email.length > EMAIL_MAX_LENGTH || !EMAIL.test(email)) throw fail("RULE_VIOLATION", "email must be a valid email address", { field: "email" });
  const fullName = input.fullName.trim();
  if (fullName.length === 0 || fullName.length > FULL_NAME_MAX_LENGTH || CONTROL_CHARACTER.test(fullName)) {
    throw fail("RULE_VIOLATION", `full_name must be 1 to ${FULL_NAME_MAX_LENGTH} characters without control characters`, { field: "full_name" });
  }
  const length = [...input.password].length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw fail("RULE_VIOLATION", `password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`, { field: "password" });
  }
  return { email, fullName, password: input.password, role: input.role ?? "member" };
}

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

export function isTenantId(id: string): boolean {
  return TENANT_ID.test(id);
}

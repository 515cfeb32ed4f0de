// Rules for users, without I/O: what a valid new user is, and what the public view of one holds.
import { DomainError } from "@switchyard/platform/domain-error.js";
import type { Role } from "@switchyard/platform/caller.js";

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;
export const FULL_NAME_MAX_LENGTH = 200;
export const EMAIL_MAX_LENGTH = 254;

// Deliberately plain: one @, a dot in the domain, no spaces or control characters.
const EMAIL = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}]+\.[^\s@\p{Cc}]+$/u;
export const CONTROL_CHARACTER = /\p{Cc}/u;

export const GIVEN_NAME_MAX_LENGTH = 100;
export const FAMILY_NAME_MAX_LENGTH = 99;

/** A name in parts; the whole name is the parts joined by a space. */
export interface PersonName {
  given: string;
  family: string;
}

export interface NewUser {
  email: string;
  fullName: string;
  name: PersonName;
  password: string;
  role: Role;
}

/** Emails are compared without case; they are stored as given, trimmed. */
export function normalizeEmail(email: string): string {
  return email.trim();
}

/**
 * The name a new user is given: either whole (full_name: then all of it is the given name, since
 * nobody can tell where a name splits) or in parts (given and family name: the whole name is them
 * joined by a space). Never both.
 */
export function validateName(input: { fullName: string; givenName?: string; familyName?: string }): {
  fullName: string;
  name: PersonName;
} {
  const inParts = Boolean(input.givenName || input.familyName);
  if (inParts && input.fullName !== "")
    throw new DomainError("RULE_VIOLATION", "give full_name or the name in parts (given_name, family_name), not both", {
      field: "full_name",
    });
  if (!inParts) {
    const fullName = input.fullName.trim();
    if (fullName.length === 0 || fullName.length > FULL_NAME_MAX_LENGTH || CONTROL_CHARACTER.test(fullName)) {
      throw new DomainError(
        "RULE_VIOLATION",
        `full_name must be 1 to ${FULL_NAME_MAX_LENGTH} characters without control characters`,
        { field: "full_name" },
      );
    }
    return { fullName, name: { given: fullName, family: "" } };
  }
  const given = (input.givenName ?? "").trim();
  const family = (input.familyName ?? "").trim();
  if (given.length === 0 || given.length > GIVEN_NAME_MAX_LENGTH || CONTROL_CHARACTER.test(given)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `name.given must be 1 to ${GIVEN_NAME_MAX_LENGTH} characters without control characters`,
      { field: "name.given" },
    );
  }
  if (family.length > FAMILY_NAME_MAX_LENGTH || CONTROL_CHARACTER.test(family)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `name.family must be at most ${FAMILY_NAME_MAX_LENGTH} characters without control characters`,
      { field: "name.family" },
    );
  }
  return { fullName: family ? `${given} ${family}` : given, name: { given, family } };
}

/**
 * A new user, as valid; a role that is neither admin nor member ("invalid": a number the proto does
 * not name) is refused first.
 */
export function validateNewUser(input: {
  email: string;
  fullName: string;
  givenName?: string;
  familyName?: string;
  password: string;
  role: Role | undefined | "invalid";
}): NewUser {
  if (input.role === "invalid")
    throw new DomainError("RULE_VIOLATION", "role must be admin or member", { field: "role" });
  const email = normalizeEmail(input.email);
  if (email.length > EMAIL_MAX_LENGTH || !EMAIL.test(email))
    throw new DomainError("RULE_VIOLATION", "email must be a valid email address", { field: "email" });
  const { fullName, name } = validateName(input);
  const length = [...input.password].length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw new DomainError(
      "RULE_VIOLATION",
      `password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`,
      { field: "password" },
    );
  }
  return { email, fullName, name, password: input.password, role: input.role ?? "member" };
}

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

export function isTenantId(id: string): boolean {
  return TENANT_ID.test(id);
}

// Rules for new tenants, without I/O. Tenants are made by the operator — the people who run the
// deployment, calling as their own service (operatorCallPolicy) — each with its first admin, who then manages
// the tenant's users through the ordinary API.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { CONTROL_CHARACTER, isTenantId, normalizeEmail, validateNewUser, type NewUser } from "./users.js";

export const DISPLAY_NAME_MAX_LENGTH = 200;

export interface NewTenant {
  id: string;
  displayName: string;
  admin: NewUser;
}

/** The first admin breaks a rule of CreateUser: said with the request's own field names (admin_…). */
function asAdminRule(err: unknown): unknown {
  const field = err instanceof DomainError ? err.details.field : undefined;
  return field
    ? new DomainError("RULE_VIOLATION", `admin ${(err as DomainError).message}`, { field: `admin_${field}` })
    : err;
}

export function validateNewTenant(input: {
  tenantId: string;
  displayName: string;
  adminEmail: string;
  adminFullName: string;
  adminPassword: string;
}): NewTenant {
  if (!isTenantId(input.tenantId)) {
    throw new DomainError(
      "RULE_VIOLATION",
      "tenant_id must be a lower-case slug: a-z, 0-9 and '-', 1 to 63 characters, not starting with '-'",
      { field: "tenant_id" },
    );
  }
  const displayName = input.displayName.trim() || input.tenantId;
  if (displayName.length > DISPLAY_NAME_MAX_LENGTH || CONTROL_CHARACTER.test(displayName)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `display_name must be at most ${DISPLAY_NAME_MAX_LENGTH} characters without control characters`,
      { field: "display_name" },
    );
  }
  try {
    // The same rules as any user's; the name defaults to the email, which is all an operator may know.
    const admin = validateNewUser({
      email: input.adminEmail,
      fullName: input.adminFullName.trim() || normalizeEmail(input.adminEmail),
      password: input.adminPassword,
      role: "admin",
    });
    return { id: input.tenantId, displayName, admin };
  } catch (err) {
    throw asAdminRule(err);
  }
}

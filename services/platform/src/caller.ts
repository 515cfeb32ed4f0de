// Who is calling, as the verified token says, and the rules on it that every service applies: pure
// (no transport, no storage), so domain rules may use them. Tokens are verified in auth.ts.
import { DomainError } from "./domain-error.js";

export const TOKEN_ISSUER = "switchyard-identity";
export const TOKEN_AUDIENCE = "switchyard";
export const TOKEN_ALGORITHM = "EdDSA";
export const SERVICE_TOKEN_AUDIENCE = "switchyard-service";
export const SERVICE_TOKEN_ROLE = "service";
/** The metadata key that carries a service's own token. */
export const SERVICE_AUTHORIZATION = "service-authorization";

export type Role = "admin" | "member";

/** An internal service acting as itself: known by its certificate (mutual TLS) or its verified service token. */
export interface CallingService {
  /** The service's name (its client id at identity, its SPIFFE ID's last part), e.g. "orders". */
  service: string;
}

/** An internal service as its verified service token names it. */
export interface ServiceCaller extends CallingService {
  expiresAt: number;
  token: string;
}

export interface Caller {
  tenantId: string;
  userId: bigint;
  role: Role;
  sessionId: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** The raw token, to pass on to downstream services (never changed: the gateway keeps its Authorization text per Caller). */
  readonly token: string;
  /**
   * The internal service that made this call on the user's behalf with its own authority — known by
   * its certificate (mutual TLS) or its own token — when the method's call policy lets it act so.
   */
  service?: string;
}

/** A service's name: what identity's IDENTITY_SERVICE_CREDENTIALS and a service's token call it. */
export const SERVICE_NAME = /^[a-z][a-z0-9-]{0,31}$/;
/** The service name of the gateway's own credential: the one service whose word on a client's address is taken. */
export const GATEWAY_SERVICE = "gateway";
/** The service name of the operator's credential ("operator:<secret>"): identity's OperatorService takes no other. */
export const OPERATOR_SERVICE = "operator";

/** The principal of a service acting with its own authority (its keys are its own, see principalOf). */
export const servicePrincipal = (service: string): string => `service:${service}`;

/**
 * Who an Idempotency-Key belongs to: the internal service when it acts with its own authority (its
 * token beside the user's: orders charging for an order), else the user. Keys are scoped by it.
 */
export function principalOf(caller: Caller): string {
  return caller.service !== undefined ? servicePrincipal(caller.service) : `user:${caller.userId}`;
}

/** A token is valid for its own tenant's resources only. */
export function requireTenant(caller: Caller, tenantId: string): void {
  if (caller.tenantId !== tenantId) throw new DomainError("TENANT_MISMATCH", "the token belongs to another tenant");
}

export function requireRole(caller: Caller, role: Role): void {
  if (caller.role !== role) throw new DomainError("ROLE_REQUIRED", `this action needs the ${role} role`);
}

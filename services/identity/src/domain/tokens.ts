// What an access token says about its holder (the claims), decided without I/O.
import {
  SERVICE_TOKEN_AUDIENCE,
  SERVICE_TOKEN_ROLE,
  TOKEN_AUDIENCE,
  TOKEN_ISSUER,
  type Role,
} from "@switchyard/platform/caller.js";

/** Service tokens live short: a service fetches a new one long before this passes. */
export const SERVICE_TOKEN_TTL_SECONDS = 300;

export interface TokenSubject {
  tenantId: string;
  userId: bigint;
  role: Role;
  sessionId: string;
}

export function accessTokenClaims(subject: TokenSubject, issuedAtSeconds: number, ttlSeconds: number) {
  return {
    iss: TOKEN_ISSUER,
    aud: TOKEN_AUDIENCE,
    sub: subject.userId.toString(),
    tid: subject.tenantId,
    role: subject.role,
    sid: subject.sessionId,
    iat: issuedAtSeconds,
    exp: issuedAtSeconds + ttlSeconds,
  };
}

/** A service's own token: its name and nothing of any user or tenant. */
export function serviceTokenClaims(service: string, issuedAtSeconds: number, ttlSeconds = SERVICE_TOKEN_TTL_SECONDS) {
  return {
    iss: TOKEN_ISSUER,
    aud: SERVICE_TOKEN_AUDIENCE,
    sub: service,
    role: SERVICE_TOKEN_ROLE,
    iat: issuedAtSeconds,
    exp: issuedAtSeconds + ttlSeconds,
  };
}

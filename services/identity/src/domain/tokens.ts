// What an access token says about its holder (the claims), decided without I/O.
import { TOKEN_AUDIENCE, TOKEN_ISSUER, type Role } from "@switchyard/platform";

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

// Bearer tokens: Ed25519-signed JWTs issued by identity, verified by every service itself
// (tenant and role enforced where the data lives: a forged header gets nobody in).
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JWK } from "jose";
import type { HandlerContext } from "@connectrpc/connect";
import { fail } from "./errors.js";
import { requestMetadataValue } from "./grpc/handler-context.js";

export const TOKEN_ISSUER = "switchyard-identity";
export const TOKEN_AUDIENCE = "switchyard";
export const TOKEN_ALGORITHM = "EdDSA";

export type Role = "admin" | "member";

export interface Caller {
  tenantId: string;
  userId: bigint;
  role: Role;
  sessionId: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** The raw token, to pass on to downstream services. */
  token: string;
}

export type KeySource = () => Promise<JWK[]>;

const MAX_CACHED_TOKENS = 10_000;
// An unknown key id triggers a fresh look at the keys at most this often (garbage tokens must not
// turn into a storm of JWKS calls).
const KEY_REFRESH_INTERVAL_MS = 1_000;

/** Splits `Bearer <token>`; anything else is unauthenticated. */
export function bearerToken(header: string | undefined): string {
  const match = header ? /^Bearer ([A-Za-z0-9_\-.~+/]+=*)$/i.exec(header.trim()) : null;
  if (!match?.[1]) throw fail("UNAUTHENTICATED", header ? "the Authorization header must be 'Bearer <token>'" : "a bearer token is required");
  return match[1];
}

export class TokenVerifier {
  private keys: ReturnType<typeof createLocalJWKSet> | undefined;
  private lastRefresh = 0;
  private refreshing: Promise<void> | undefined;
  // Verified tokens, by token string, until they expire: verification is the hot path's largest cost.
  private readonly cache = new Map<string, Caller>();

  constructor(private readonly keySource: KeySource, private readonly now: () => number = Date.now) {}

  private async refreshKeys(force: boolean): Promise<void> {
    if (this.keys && !force) return;
    if (force && this.now() - this.lastRefresh < KEY_REFRESH_INTERVAL_MS) return;
    this.refreshing ??= (async () => {
      try {
        const keys = await this.keySource();
        this.keys = createLocalJWKSet({ keys });
        this.lastRefresh = this.now();
      } finally {
        this.refreshing = undefined;
      }
    })();
    await this.refreshing;
  }

  async verify(token: string): Promise<Caller> {
    const nowSeconds = Math.floor(this.now() / 1000);
    const cached = this.cache.get(token);
    if (cached) {
      if (cached.expiresAt > nowSeconds) return cached;
      this.cache.delete(token);
      throw fail("UNAUTHENTICATED", "the token has expired");
    }
    await this.refreshKeys(false).catch(() => {
      throw fail("UPSTREAM_UNAVAILABLE", "token keys are unavailable");
    });
    let payload;
    try {
      payload = await this.verifyWithKeys(token);
    } catch (err) {
      if (err instanceof joseErrors.JWKSNoMatchingKey) {
        // A key rotated in since we last looked: look again (rate-limited), then try once more.
        await this.refreshKeys(true).catch(() => {});
        payload = await this.verifyWithKeys(token).catch((e: unknown) => { throw this.toAuthError(e); });
      } else {
        throw this.toAuthError(err);
      }
    }
    const caller = this.callerOf(payload, token);
    if (this.cache.size >= MAX_CACHED_TOKENS) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(token, caller);
    return caller;
  }

  private async verifyWithKeys(token: string) {
    const { payload } = await jwtVerify(token, this.keys!, {
      issuer: TOKEN_ISSUER,
      audience: TOKEN_AUDIENCE,
      algorithms: [TOKEN_ALGORITHM],
      currentDate: new Date(this.now()),
      requiredClaims: ["sub", "tid", "role", "exp", "sid"],
    });
    return payload;
  }

  private toAuthError(err: unknown) {
    if (err instanceof joseErrors.JWTExpired) return fail("UNAUTHENTICATED", "the token has expired");
    return fail("UNAUTHENTICATED", "the token is not valid");
  }

  private callerOf(payload: Record<string, unknown>, token: string): Caller {
    const { sub, tid, role, sid, exp } = payload;
    if (typeof sub !== "string" || !/^\d{1,19}$/.test(sub) || typeof tid !== "string" || (role !== "admin" && role !== "member") || typeof sid !== "string" || typeof exp !== "number") {
      throw fail("UNAUTHENTICATED", "the token is not valid");
    }
    return { tenantId: tid, userId: BigInt(sub), role, sessionId: sid, expiresAt: exp, token };
  }

  /** The caller of an RPC, from its `authorization` metadata. */
  async authenticate(context: HandlerContext): Promise<Caller> {
    return this.verify(bearerToken(requestMetadataValue(context, "authorization")));
  }
}

/** A token is valid for its own tenant's resources only. */
export function requireTenant(caller: Caller, tenantId: string): void {
  if (caller.tenantId !== tenantId) throw fail("TENANT_MISMATCH", "the token belongs to another tenant");
}

export function requireRole(caller: Caller, role: Role): void {
  if (caller.role !== role) throw fail("ROLE_REQUIRED", `this action needs the ${role} role`);
}

/** Call options that carry the caller's credential and the remaining deadline downstream. */
export function downstreamOptions(caller: Caller, context: HandlerContext) {
  const timeoutMs = context.timeoutMs();
  return {
    signal: context.signal,
    headers: { authorization: `Bearer ${caller.token}` },
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  };
}

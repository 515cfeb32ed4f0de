// Bearer tokens: Ed25519-signed JWTs issued by identity, verified by every service itself
// (tenant and role enforced where the data lives: a forged header gets nobody in). Two kinds, told
// apart by their audience: a user's access token (`authorization` metadata), and an internal
// service's own token (`service-authorization` metadata), which a service presents when it acts as
// itself — beside the user's token, or alone for work no user asked for. Neither passes as the other.
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JWK } from "jose";
import type { HandlerContext } from "@connectrpc/connect";
import { fail } from "./errors.js";
import { downstreamTimeoutMs, passedOn } from "./call-deadline.js";
import { callScopeOf, requestMetadataValue } from "./grpc/handler-context.js";
import type { RevocationList } from "./revocations.js";
import {
  SERVICE_AUTHORIZATION,
  SERVICE_NAME,
  SERVICE_TOKEN_AUDIENCE,
  SERVICE_TOKEN_ROLE,
  TOKEN_ALGORITHM,
  TOKEN_AUDIENCE,
  TOKEN_ISSUER,
  type Caller,
  type ServiceCaller,
} from "./caller.js";

export type KeySource = () => Promise<JWK[]>;

const MAX_CACHED_TOKENS = 10_000;
// An unknown key id triggers a fresh look at the keys at most this often (garbage tokens must not
// turn into a storm of JWKS calls).
const KEY_REFRESH_INTERVAL_MS = 1_000;
// The keys are looked at again this often anyway: identity publishes a new key 10 minutes before it
// signs, and forgets retired ones, so a verifier always knows a key before it meets its first token.
export const KEY_MAX_AGE_MS = 5 * 60_000;

/** Keeps `value` under `key` in a cache of at most MAX_CACHED_TOKENS entries (the oldest goes first). */
function remember<T>(cache: Map<string, T>, key: string, value: T): void {
  if (cache.size >= MAX_CACHED_TOKENS) cache.delete(cache.keys().next().value as string);
  cache.set(key, value);
}

/** Splits `Bearer <token>`; anything else is unauthenticated. */
export function bearerToken(header: string | undefined): string {
  const match = header ? /^Bearer ([A-Za-z0-9_\-.~+/]+=*)$/i.exec(header.trim()) : null;
  if (!match?.[1])
    throw fail(
      "UNAUTHENTICATED",
      header ? "the Authorization header must be 'Bearer <token>'" : "a bearer token is required",
    );
  return match[1];
}

export class TokenVerifier {
  private keys: ReturnType<typeof createLocalJWKSet> | undefined;
  private lastRefresh = 0;
  private refreshing: Promise<void> | undefined;
  // Verified tokens, by token string, until they expire: verification is the hot path's largest cost.
  private readonly cache = new Map<string, Caller>();
  private readonly serviceCache = new Map<string, ServiceCaller>();
  /** Verified users by the exact `Authorization` header text that named their token: a header seen before is not parsed again. */
  private readonly byHeader = new Map<string, Caller>();

  constructor(
    private readonly keySource: KeySource,
    private readonly now: () => number = Date.now,
    /** Sessions revoked before their tokens expire (followed from identity); none known when absent. */
    private readonly revocations?: RevocationList,
  ) {}

  private async refreshKeys(force: boolean): Promise<void> {
    const age = this.now() - this.lastRefresh;
    if (this.keys && !force && age < KEY_MAX_AGE_MS) return;
    if (this.keys && force && age < KEY_REFRESH_INTERVAL_MS) return;
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

  /** A user's access token (refused once its session is revoked, cached or not). */
  async verify(token: string): Promise<Caller> {
    const caller = await this.verifyCached(this.cache, token, USER_TOKEN, (payload) => this.callerOf(payload, token));
    if (this.revocations?.isRevoked(caller.sessionId))
      throw fail("UNAUTHENTICATED", "the token was revoked (logged out, or its user was removed)");
    return caller;
  }

  /**
   * The user of an `Authorization: Bearer <token>` header (refused as `verify` refuses). A header
   * seen before, whose caller is still good, is answered from its text alone: no parsing, no second
   * lookup by token (each request's hop does this once at the edge and once in the service).
   */
  async verifyAuthorization(header: string | undefined): Promise<Caller> {
    const known = this.knownAuthorization(header);
    if (known) return known;
    const caller = await this.verify(bearerToken(header));
    remember(this.byHeader, header!, caller);
    return caller;
  }

  /**
   * The user of a header seen before whose caller is still good, at once (no promise: the edge's hot
   * path asks this first); undefined when `verifyAuthorization` must decide.
   */
  knownAuthorization(header: string | undefined): Caller | undefined {
    const known = header === undefined ? undefined : this.byHeader.get(header);
    if (!known) return undefined;
    if (known.expiresAt > Math.floor(this.now() / 1000) && !this.revocations?.isRevoked(known.sessionId)) return known;
    // No longer good: forgotten here, and refused by verifyAuthorization with the reason verify gives.
    this.byHeader.delete(header!);
    return undefined;
  }

  /**
   * Calls `end` once when the caller's token stops being good — it expires, or its session is revoked —
   * so a long call made with it (a live stream) does not outlive it. Returns the way to stop watching.
   */
  watch(caller: Caller, end: (reason: Error) => void): () => void {
    let done = false;
    const finish = (reason: Error) => {
      if (done) return;
      done = true;
      stop();
      end(reason);
    };
    const timer = setTimeout(
      () => finish(fail("UNAUTHENTICATED", "the token has expired")),
      Math.max(0, caller.expiresAt * 1000 - this.now()),
    );
    timer.unref();
    const unwatch = this.revocations?.onRevoked(caller.sessionId, () =>
      finish(fail("UNAUTHENTICATED", "the token was revoked (logged out, or its user was removed)")),
    );
    const stop = () => {
      clearTimeout(timer);
      unwatch?.();
    };
    return () => {
      done = true;
      stop();
    };
  }

  /** An internal service's own token. */
  verifyService(token: string): Promise<ServiceCaller> {
    return this.verifyCached(this.serviceCache, token, SERVICE_TOKEN, (payload) =>
      this.serviceCallerOf(payload, token),
    );
  }

  private async verifyCached<T extends { expiresAt: number }>(
    cache: Map<string, T>,
    token: string,
    kind: TokenKind,
    read: (payload: Record<string, unknown>) => T,
  ): Promise<T> {
    const nowSeconds = Math.floor(this.now() / 1000);
    const cached = cache.get(token);
    if (cached) {
      if (cached.expiresAt > nowSeconds) return cached;
      cache.delete(token);
      throw fail("UNAUTHENTICATED", "the token has expired");
    }
    await this.refreshKeys(false).catch(() => {
      // Keys known from before still verify while identity is away.
      if (!this.keys) throw fail("UPSTREAM_UNREACHABLE", "token keys are unavailable: identity cannot be reached");
    });
    let payload;
    try {
      payload = await this.verifyWithKeys(token, kind);
    } catch (err) {
      if (err instanceof joseErrors.JWKSNoMatchingKey) {
        // A key rotated in since we last looked: look again (rate-limited), then try once more.
        await this.refreshKeys(true).catch(() => {});
        payload = await this.verifyWithKeys(token, kind).catch((e: unknown) => {
          throw this.toAuthError(e);
        });
      } else {
        throw this.toAuthError(err);
      }
    }
    const verified = read(payload);
    remember(cache, token, verified);
    return verified;
  }

  private async verifyWithKeys(token: string, kind: TokenKind) {
    const { payload } = await jwtVerify(token, this.keys!, {
      issuer: TOKEN_ISSUER,
      audience: kind.audience,
      algorithms: [TOKEN_ALGORITHM],
      currentDate: new Date(this.now()),
      requiredClaims: kind.requiredClaims,
    });
    return payload;
  }

  private toAuthError(err: unknown) {
    if (err instanceof joseErrors.JWTExpired) return fail("UNAUTHENTICATED", "the token has expired");
    return fail("UNAUTHENTICATED", "the token is not valid");
  }

  private callerOf(payload: Record<string, unknown>, token: string): Caller {
    const { sub, tid, role, sid, exp } = payload;
    if (
      typeof sub !== "string" ||
      !/^\d{1,19}$/.test(sub) ||
      typeof tid !== "string" ||
      (role !== "admin" && role !== "member") ||
      typeof sid !== "string" ||
      typeof exp !== "number"
    ) {
      throw fail("UNAUTHENTICATED", "the token is not valid");
    }
    return { tenantId: tid, userId: BigInt(sub), role, sessionId: sid, expiresAt: exp, token };
  }

  private serviceCallerOf(payload: Record<string, unknown>, token: string): ServiceCaller {
    const { sub, role, exp } = payload;
    if (typeof sub !== "string" || !SERVICE_NAME.test(sub) || role !== SERVICE_TOKEN_ROLE || typeof exp !== "number")
      throw fail("UNAUTHENTICATED", "the service token is not valid");
    return { service: sub, expiresAt: exp, token };
  }

  /**
   * The user behind an RPC, from its `authorization` metadata; `service` is set when an internal
   * service also presented its own token (a present but invalid one is refused, never ignored).
   */
  async authenticate(context: HandlerContext): Promise<Caller> {
    const caller = await this.verifyAuthorization(requestMetadataValue(context, "authorization"));
    const serviceHeader = requestMetadataValue(context, SERVICE_AUTHORIZATION);
    if (serviceHeader === undefined) return caller;
    const { service } = await this.verifyService(bearerToken(serviceHeader));
    return { ...caller, service };
  }

  /** The user behind an RPC at once, when its `authorization` was verified before and no service token comes with it (authenticate decides otherwise). */
  knownCaller(context: HandlerContext): Caller | undefined {
    if (requestMetadataValue(context, SERVICE_AUTHORIZATION) !== undefined) return undefined;
    return this.knownAuthorization(requestMetadataValue(context, "authorization"));
  }

  /** The internal service behind an RPC that no user asked for, from its `service-authorization` metadata. */
  async authenticateService(context: HandlerContext): Promise<ServiceCaller> {
    const header = requestMetadataValue(context, SERVICE_AUTHORIZATION);
    if (header === undefined) throw fail("UNAUTHENTICATED", "an internal service's token is required");
    return this.verifyService(bearerToken(header));
  }
}

interface TokenKind {
  audience: string;
  requiredClaims: string[];
}
const USER_TOKEN: TokenKind = { audience: TOKEN_AUDIENCE, requiredClaims: ["sub", "tid", "role", "exp", "sid"] };
const SERVICE_TOKEN: TokenKind = { audience: SERVICE_TOKEN_AUDIENCE, requiredClaims: ["sub", "role", "exp"] };

/**
 * Call options that carry the caller's credential, the remaining deadline, the request id and the
 * priority downstream — and the calling service's own token when it acts with its own authority too.
 */
export function downstreamOptions(caller: Caller, context: HandlerContext, serviceToken?: string) {
  const timeoutMs = downstreamTimeoutMs(context.timeoutMs());
  const headers: Record<string, string> = {
    ...passedOn(callScopeOf(context)),
    authorization: `Bearer ${caller.token}`,
  };
  if (serviceToken !== undefined) headers[SERVICE_AUTHORIZATION] = `Bearer ${serviceToken}`;
  return {
    signal: context.signal,
    headers,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  };
}

// A service's own token, for calls it makes with its own authority (OAuth 2.0 client credentials
// at identity): fetched when first needed, kept until most of its lifetime has passed, fetched
// again by one caller while the others wait for the same answer.
import type { Client as GrpcChannelClient } from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { fail } from "./errors.js";
import { createServiceClient } from "./grpc/client.js";

const ISSUE_TIMEOUT_MS = 3_000;
/** Renew once this share of the lifetime has passed: a call never leaves with a token about to expire. */
const RENEW_AT = 0.5;

export interface IssuedToken {
  token: string;
  expiresInSeconds: number;
}

export class ServiceCredentials {
  private current: { token: string; renewAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly issue: () => Promise<IssuedToken>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The service's token (UPSTREAM_UNAVAILABLE while identity cannot be reached). */
  token(): Promise<string> {
    if (this.current && this.now() < this.current.renewAt) return Promise.resolve(this.current.token);
    this.pending ??= this.issue()
      .then(({ token, expiresInSeconds }) => {
        this.current = { token, renewAt: this.now() + expiresInSeconds * 1000 * RENEW_AT };
        return token;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }
}

/** Credentials issued by identity over the channel the service already keeps to it. */
export function serviceCredentialsFromIdentity(
  channel: GrpcChannelClient,
  clientId: string,
  clientSecret: string,
): ServiceCredentials {
  const identity = createServiceClient(IdentityService, channel);
  return new ServiceCredentials(async () => {
    try {
      const res = await identity.createServiceToken({ clientId, clientSecret }, { timeoutMs: ISSUE_TIMEOUT_MS });
      return { token: res.accessToken, expiresInSeconds: res.expiresInSeconds };
    } catch (err) {
      const code = err instanceof ConnectError ? err.code : Code.Unknown;
      // A refused secret is the operator's misconfiguration, not the caller's fault: a 500 that says
      // nothing outside, while the cause is logged where the operator looks.
      if (code === Code.Unauthenticated || code === Code.InvalidArgument)
        throw fail("INTERNAL", `identity refused the credentials of service "${clientId}"`);
      // Nothing was done for the call yet: unreachable, retry later (503), whatever identity said.
      throw fail("UPSTREAM_UNREACHABLE", "identity is unavailable: the service cannot get its token");
    }
  });
}

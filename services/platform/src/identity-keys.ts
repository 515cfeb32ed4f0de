// What services other than identity trust identity for, over the long-lived channel they already
// keep to it: the token verification keys (GetJwks) and the revoked sessions (WatchRevocations).
import type { JWK } from "jose";
import type { Client as GrpcChannelClient } from "@grpc/grpc-js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { TokenVerifier, type KeySource } from "./auth.js";
import type { Logger } from "./logger.js";
import { followRevocations, RevocationList, type RevocationFollower } from "./revocations.js";
import { createServiceClient } from "./grpc/client.js";

const JWKS_TIMEOUT_MS = 3_000;

export function jwksFromIdentity(channel: GrpcChannelClient): KeySource {
  const identity = createServiceClient(IdentityService, channel);
  return async () => {
    const { keys } = await identity.getJwks({}, { timeoutMs: JWKS_TIMEOUT_MS });
    return keys.map((k): JWK => ({ kid: k.kid, kty: k.kty, crv: k.crv, x: k.x, alg: k.alg, use: k.use }));
  };
}

/** How long a starting process waits for the standing revocations before it serves anyway (identity away). */
const REVOCATIONS_AT_START_MS = 2_000;

/**
 * A verifier that trusts what identity publishes: its signing keys, and the sessions it revokes
 * (followed for as long as the process runs; `follower.stop()` ends that). Resolves once the
 * revocations standing now are known — a process that starts serves no token revoked before — or,
 * with identity away, after a short wait (logged): tokens are then refused from the moment it answers.
 */
export async function verifierFromIdentity(
  channel: GrpcChannelClient,
  logger: Logger,
): Promise<{ verifier: TokenVerifier; revocations: RevocationList; follower: RevocationFollower }> {
  const revocations = new RevocationList();
  const follower = followRevocations(channel, revocations, logger);
  if (!(await follower.synced(REVOCATIONS_AT_START_MS)))
    logger.warn("identity's revocations are not known yet; following them as soon as it answers");
  return { verifier: new TokenVerifier(jwksFromIdentity(channel), Date.now, revocations), revocations, follower };
}

// Where services other than identity get the token verification keys: identity's GetJwks RPC,
// over the long-lived channel the service already keeps to it.
import type { JWK } from "jose";
import type { Client as GrpcChannelClient } from "@grpc/grpc-js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import type { KeySource } from "./auth.js";
import { createServiceClient } from "./grpc/client.js";

const JWKS_TIMEOUT_MS = 3_000;

export function jwksFromIdentity(channel: GrpcChannelClient): KeySource {
  const identity = createServiceClient(IdentityService, channel);
  return async () => {
    const { keys } = await identity.getJwks({}, { timeoutMs: JWKS_TIMEOUT_MS });
    return keys.map((k): JWK => ({ kid: k.kid, kty: k.kty, crv: k.crv, x: k.x, alg: k.alg, use: k.use }));
  };
}

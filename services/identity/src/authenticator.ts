// How identity authenticates its calls. Identity owns the users, so it does not take a token's word
// for them: a deleted user's token stops working here at once, and the role is the stored one.
// (Other services trust a token until it expires or is revoked.)
import type { HandlerContext } from "@connectrpc/connect";
import { fail } from "@switchyard/platform/errors.js";
import { GATEWAY_SERVICE, OPERATOR_SERVICE, type Caller, type ServiceCaller } from "@switchyard/platform/caller.js";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import {
  ANYONE,
  authentication,
  USERS,
  type Authenticator,
  type CallPolicy,
  type ServiceInterceptor,
} from "@switchyard/platform/grpc";
import type { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import type { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import type { IdentityStore } from "./store/port.js";

export class IdentityAuthenticator implements Authenticator {
  constructor(
    private readonly verifier: TokenVerifier,
    private readonly store: IdentityStore,
  ) {}

  async authenticate(context: HandlerContext): Promise<Caller> {
    const caller = await this.verifier.authenticate(context);
    const user = await this.store.getUser(caller.tenantId, caller.userId);
    if (!user) throw fail("UNAUTHENTICATED", "the user of this token no longer exists");
    return { ...caller, role: user.role };
  }

  authenticateService(context: HandlerContext): Promise<ServiceCaller> {
    return this.verifier.authenticateService(context);
  }

  watch(caller: Caller, end: (reason: Error) => void): () => void {
    return this.verifier.watch(caller, end);
  }
}

/**
 * Who may call identity: logging in, the public keys, a service's own token and the revocations
 * (every verifier follows them; they name dead sessions only) need no credential; everything else a
 * user's token.
 */
export const identityCallPolicy: CallPolicy<typeof IdentityService> = {
  createSession: ANYONE,
  getJwks: ANYONE,
  createServiceToken: ANYONE,
  watchRevocations: ANYONE,
  getSession: USERS,
  deleteSession: USERS,
  getTenant: USERS,
  listUsers: USERS,
  createUser: USERS,
  getUser: USERS,
  deleteUser: USERS,
};

/** The operator's RPC is the operator's alone (its certificate, or its own token): no user's, no other service's. */
export const operatorCallPolicy: CallPolicy<typeof OperatorService> = {
  createTenant: { services: [OPERATOR_SERVICE] },
};

/**
 * What every call to identity goes through before its handler, besides the server's own steps: its
 * caller, as the call policy says. The client's address (failed logins are counted by it) is the
 * gateway's word alone, known as services are. No method of identity takes an Idempotency-Key.
 */
export const identityInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof IdentityService>({
    authenticator,
    access: identityCallPolicy,
    clientAddressFrom: [GATEWAY_SERVICE],
  }),
];

export const operatorInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof OperatorService>({ authenticator, access: operatorCallPolicy }),
];

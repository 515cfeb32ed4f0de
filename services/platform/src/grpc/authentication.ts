// Authentication, once per call, in the interceptor chain (interceptors/authentication.ts): before a
// handler runs, the call's credentials are checked against its method's entry in the service's call
// policy (call-policy.ts) — a user's token, an internal service known by its certificate (mutual TLS)
// or its own token, or none — and the verified caller is put in the call's context, where the handler
// reads it. A handler never sees a call its method's entry does not admit.
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { SERVICE_AUTHORIZATION, type Caller, type CallingService, type ServiceCaller } from "../caller.js";
import { fail } from "../errors.js";
import type { CallPolicy, MethodAccess, PeerIdentity } from "./call-policy.js";
import { CLIENT_ADDRESS_HEADER, peerHostOf, requestMetadataValue } from "./handler-context.js";

/** Verifies a call's credentials (TokenVerifier, or a service's own stricter one). */
export interface Authenticator {
  /** The user behind the call (its `authorization` metadata), with `service` when a service also presented its token. */
  authenticate(context: HandlerContext): Promise<Caller>;
  /**
   * The user behind the call at once, when its credential was verified before and is still good, as
   * `authenticate` would answer; undefined when `authenticate` must decide. (Most calls carry a
   * token seen before: they skip a chain of promises.)
   */
  knownCaller?(context: HandlerContext): Caller | undefined;
  /** The internal service behind the call (its `service-authorization` metadata). */
  authenticateService(context: HandlerContext): Promise<ServiceCaller>;
  /** Calls `end` when the caller's credential stops being good (expiry, revocation); returns the way to stop watching. */
  watch?(caller: Caller, end: (reason: Error) => void): () => void;
}

/** How a service's calls are authenticated: its verifier, its call policy, and whose forwarded client address it takes. */
export interface AuthenticationPolicy<S extends DescService = DescService> {
  authenticator: Authenticator;
  /** Who may call each method. */
  access: CallPolicy<S>;
  /**
   * The internal services whose word on the client's address (x-client-address) is taken, known as
   * services are (certificate or own token); from anyone else it is ignored and the call's own peer
   * counts. Absent: nobody's.
   */
  clientAddressFrom?: readonly string[];
}

const CALLER = createContextKey<Caller | undefined>(undefined, { description: "the verified user" });
const SERVICE_CALLER = createContextKey<CallingService | undefined>(undefined, {
  description: "the verified internal service",
});
const CLIENT_ADDRESS = createContextKey<string | undefined>(undefined, {
  description: "the client's address, as a trusted service forwarded it",
});

/** Longer than any address a proxy writes: anything longer is not an address. */
const MAX_ADDRESS_LENGTH = 100;

/** The way to stop watching a credential nobody watches. */
const UNWATCHED = () => {};

/** Checks a call's credentials before its handler; see authenticationFor. */
export type CallAuthentication = (
  context: HandlerContext,
  end?: (reason: Error) => void,
) => (() => void) | Promise<() => void>;

/**
 * What runs before a method's handler: verifies the call as the method's entry in the call policy
 * says and records the caller (undefined for anyone's methods). It gives the way to stop watching the
 * caller's credential — at once when the caller is known (Authenticator.knownCaller), else when
 * verified — or rejects: for a method that streams its answers, `end` is called when the credential
 * stops being good mid-stream. `peer`: how the transport names the calling service (mutual TLS).
 */
export function authenticationFor(
  policy: AuthenticationPolicy | undefined,
  method: DescMethod,
  peer?: PeerIdentity,
): CallAuthentication | undefined {
  if (!policy) return undefined;
  const access = (policy.access as Record<string, MethodAccess | undefined>)[method.localName];
  // The type lists every method; a policy made around it fails here, at start, not at a call.
  if (!access) throw new Error(`${method.parent.typeName}/${method.name} has no entry in its service's call policy`);
  const credentials = credentialsFor(policy.authenticator, access, method, peer);
  const forwarders = policy.clientAddressFrom;
  if (!forwarders?.length) return credentials;
  // The forwarded address is settled before the handler runs, whatever the method needs besides.
  return async (context, end) => {
    await believeForwardedAddress(context, policy.authenticator, forwarders, peer);
    return credentials ? credentials(context, end) : UNWATCHED;
  };
}

/**
 * The internal service making the call, as itself: with mutual TLS the one its certificate names —
 * and a service token beside it must be that service's (a token taken elsewhere is refused) — else
 * the one its own service token names (verified). Undefined: no service says so.
 */
async function callingService(
  context: HandlerContext,
  authenticator: Authenticator,
  peer: PeerIdentity | undefined,
): Promise<string | undefined> {
  const fromToken =
    requestMetadataValue(context, SERVICE_AUTHORIZATION) === undefined
      ? undefined
      : (await authenticator.authenticateService(context)).service;
  if (!peer) return fromToken;
  const fromCertificate = peer(context);
  if (fromToken !== undefined && fromToken !== fromCertificate) throw tokenOfAnotherService(fromToken, fromCertificate);
  return fromCertificate;
}

const tokenOfAnotherService = (token: string, certificate: string | undefined) =>
  fail(
    "UNAUTHENTICATED",
    `the service token is ${token}'s, but the connection's certificate is ${certificate === undefined ? "no service's" : `${certificate}'s`}`,
  );

/**
 * Takes the call's x-client-address as the client's address when a service allowed to state it sent
 * it, known as services are; otherwise leaves it unsaid (the peer counts). A credential that does not
 * verify proves nothing: the address is ignored, the call not refused for it.
 */
async function believeForwardedAddress(
  context: HandlerContext,
  authenticator: Authenticator,
  forwarders: readonly string[],
  peer: PeerIdentity | undefined,
): Promise<void> {
  const forwarded = requestMetadataValue(context, CLIENT_ADDRESS_HEADER);
  if (forwarded === undefined || forwarded === "" || forwarded.length > MAX_ADDRESS_LENGTH) return;
  if (!peer && requestMetadataValue(context, SERVICE_AUTHORIZATION) === undefined) return;
  const service = await callingService(context, authenticator, peer).catch(() => undefined);
  if (service !== undefined && forwarders.includes(service)) context.values.set(CLIENT_ADDRESS, forwarded);
}

/**
 * The address of whoever is behind a call: the one a trusted service forwarded (see
 * AuthenticationPolicy.clientAddressFrom), else the host of the call's own peer. Use it for counting
 * and throttling, never to grant anything.
 */
export function clientAddressOf(context: HandlerContext): string {
  return context.values.get(CLIENT_ADDRESS) ?? peerHostOf(context) ?? "unknown";
}

/** The credential check of a method, as its entry says (undefined: none). */
function credentialsFor(
  authenticator: Authenticator,
  access: MethodAccess,
  method: DescMethod,
  peer: PeerIdentity | undefined,
): CallAuthentication | undefined {
  if (access.anyone) return undefined;
  const services = access.services ?? [];
  if (!access.users) {
    if (services.length === 0)
      throw new Error(`${method.parent.typeName}/${method.name}: its call policy entry admits nobody`);
    return async (context) => {
      const service = await callingService(context, authenticator, peer);
      if (service === undefined) throw fail("UNAUTHENTICATED", "an internal service's credential is required");
      if (!services.includes(service)) throw fail("ROLE_REQUIRED", `${method.name} is not for the ${service} service`);
      context.values.set(SERVICE_CALLER, { service });
      return UNWATCHED;
    };
  }
  const admitted = (context: HandlerContext, caller: Caller, end: ((reason: Error) => void) | undefined) => {
    context.values.set(CALLER, caller);
    return end && authenticator.watch ? authenticator.watch(caller, end) : UNWATCHED;
  };
  /** The caller as the policy lets it act: with `service` only when that service may act on this method. */
  const acting = (context: HandlerContext, caller: Caller): Caller => {
    let service = caller.service;
    if (peer) {
      const certified = peer(context);
      if (service !== undefined && service !== certified) throw tokenOfAnotherService(service, certified);
      service = certified;
    }
    const allowed = service !== undefined && services.includes(service) ? service : undefined;
    if (allowed === caller.service) return caller;
    const { service: _ignored, ...user } = caller;
    return allowed === undefined ? user : { ...user, service: allowed };
  };
  // Without mutual TLS, a method no service acts on needs only the user: a caller known at once is admitted at once.
  const fast = !peer || services.length === 0;
  return (context, end) => {
    const known = authenticator.knownCaller?.(context);
    if (known && fast) return admitted(context, known, end);
    if (known) return admitted(context, acting(context, known), end);
    return authenticator.authenticate(context).then((caller) => admitted(context, acting(context, caller), end));
  };
}

/** The verified user of this call (its method is one that needs a user). */
export function callerOf(context: HandlerContext): Caller {
  const caller = context.values.get(CALLER);
  if (!caller)
    throw fail("INTERNAL", `${context.method.name} reads a caller its authentication policy does not require`);
  return caller;
}

/** The verified internal service of this call (its method is one only services call). */
export function serviceCallerOf(context: HandlerContext): CallingService {
  const caller = context.values.get(SERVICE_CALLER);
  if (!caller)
    throw fail("INTERNAL", `${context.method.name} reads a service caller its authentication policy does not require`);
  return caller;
}

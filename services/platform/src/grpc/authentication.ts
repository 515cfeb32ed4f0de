// Authentication, once per call, in the server adapter: before a handler runs, the call's
// credentials are verified as its method requires — a user's token (the default), an internal
// service's own token, or none — and the verified caller is put in the call's context, where the
// handler reads it. A handler never sees an unauthenticated call of a method that needs a caller.
import { createContextKey, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { SERVICE_AUTHORIZATION, type Caller, type ServiceCaller } from "../caller.js";
import { fail } from "../errors.js";
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

type MethodName<S extends DescService> = keyof ServiceImpl<S> & string;

/** Who may call which method of a service: a user by default; `anyone` and `services` name the exceptions. */
export interface AuthenticationPolicy<S extends DescService = DescService> {
  authenticator: Authenticator;
  /** Methods that need no credential at all. */
  anyone?: readonly MethodName<S>[];
  /** Methods only an internal service calls, with its own token and no user's. */
  services?: readonly MethodName<S>[];
  /**
   * The internal services whose word on the client's address (x-client-address) is taken, known by
   * their own token on the call (the gateway's); from anyone else it is ignored and the call's own
   * peer counts. Absent: nobody's.
   */
  clientAddressFrom?: readonly string[];
}

const CALLER = createContextKey<Caller | undefined>(undefined, { description: "the verified user" });
const SERVICE_CALLER = createContextKey<ServiceCaller | undefined>(undefined, { description: "the verified internal service" });
const CLIENT_ADDRESS = createContextKey<string | undefined>(undefined, { description: "the client's address, as a trusted service forwarded it" });

/** Longer than any address a proxy writes: anything longer is not an address. */
const MAX_ADDRESS_LENGTH = 100;

/** The way to stop watching a credential nobody watches. */
const UNWATCHED = () => {};

/** Checks a call's credentials before its handler; see authenticationFor. */
export type CallAuthentication = (context: HandlerContext, end?: (reason: Error) => void) => (() => void) | Promise<() => void>;

/**
 * What runs before a method's handler: verifies the call and records the caller (undefined for
 * anyone's methods). It gives the way to stop watching the caller's credential — at once when the
 * caller is known (Authenticator.knownCaller), else when verified — or rejects: for a method that
 * streams its answers, `end` is called when the credential stops being good mid-stream.
 */
export function authenticationFor(policy: AuthenticationPolicy | undefined, method: DescMethod): CallAuthentication | undefined {
  const credentials = credentialsFor(policy, method);
  const forwarders = policy?.clientAddressFrom;
  if (!policy || !forwarders?.length) return credentials;
  // The forwarded address is settled before the handler runs, whatever the method needs besides.
  return async (context, end) => {
    await believeForwardedAddress(context, policy.authenticator, forwarders);
    return credentials ? credentials(context, end) : UNWATCHED;
  };
}

/**
 * Takes the call's x-client-address as the client's address when a service allowed to state it sent
 * it, proven by that service's own token; otherwise leaves it unsaid (the peer counts). A token that
 * does not verify proves nothing: the address is ignored, the call not refused for it.
 */
async function believeForwardedAddress(context: HandlerContext, authenticator: Authenticator, forwarders: readonly string[]): Promise<void> {
  const forwarded = requestMetadataValue(context, CLIENT_ADDRESS_HEADER);
  if (forwarded === undefined || forwarded === "" || forwarded.length > MAX_ADDRESS_LENGTH) return;
  if (requestMetadataValue(context, SERVICE_AUTHORIZATION) === undefined) return;
  const service = await authenticator.authenticateService(context).then(
    (s) => s.service,
    () => undefined,
  );
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

/** The credential check of a method, as its policy says (undefined: none). */
function credentialsFor(policy: AuthenticationPolicy | undefined, method: DescMethod): CallAuthentication | undefined {
  if (!policy || policy.anyone?.includes(method.localName)) return undefined;
  const { authenticator } = policy;
  if (policy.services?.includes(method.localName)) {
    return async (context) => {
      context.values.set(SERVICE_CALLER, await authenticator.authenticateService(context));
      return UNWATCHED;
    };
  }
  const admitted = (context: HandlerContext, caller: Caller, end: ((reason: Error) => void) | undefined) => {
    context.values.set(CALLER, caller);
    return end && authenticator.watch ? authenticator.watch(caller, end) : UNWATCHED;
  };
  return (context, end) => {
    const known = authenticator.knownCaller?.(context);
    if (known) return admitted(context, known, end);
    return authenticator.authenticate(context).then((caller) => admitted(context, caller, end));
  };
}

/** The verified user of this call (its method is one that needs a user). */
export function callerOf(context: HandlerContext): Caller {
  const caller = context.values.get(CALLER);
  if (!caller) throw fail("INTERNAL", `${context.method.name} reads a caller its authentication policy does not require`);
  return caller;
}

/** The verified internal service of this call (its method is one only services call). */
export function serviceCallerOf(context: HandlerContext): ServiceCaller {
  const caller = context.values.get(SERVICE_CALLER);
  if (!caller) throw fail("INTERNAL", `${context.method.name} reads a service caller its authentication policy does not require`);
  return caller;
}

// Who may call each method of a service, in one table per service (beside its handlers:
// rpc-handlers.ts, or identity's authenticator.ts), enforced by the interceptor chain before any
// handler runs (interceptors/authentication.ts): anyone, users (a user's token; the service's domain
// rules decide the rest), and named internal services. An internal service is known by its
// certificate's SPIFFE ID when the server runs mutual TLS (grpc/tls.ts), and by its own service token
// otherwise; with both, they must agree.
import type { DescService } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { peerCertificateOf } from "./handler-context.js";
import { serviceNamedBy } from "./tls.js";

export type MethodName<S extends DescService> = keyof ServiceImpl<S> & string;

/** Who may call one method; a method nobody may call is not served. */
export interface MethodAccess {
  /** No credential at all (logging in, public keys, the public catalog). */
  readonly anyone?: true;
  /** A user's token, of any tenant and role: the handler's domain rules decide what the user may do. */
  readonly users?: true;
  /**
   * Internal services that may call it as themselves. Alone: only they may call it. Beside `users`: the
   * call is still a user's, and one of these services makes it with its own authority too
   * (`Caller.service`, which domain rules and Idempotency-Key scopes read); any other service's word
   * is not taken on it.
   */
  readonly services?: readonly string[];
}

/** The entries most methods have. */
export const ANYONE: MethodAccess = { anyone: true };
export const USERS: MethodAccess = { users: true };

/** A service's table: every method, with who may call it (the type leaves none out). */
export type CallPolicy<S extends DescService> = { readonly [M in MethodName<S>]: MethodAccess };

/** The internal service at the other end of a call, by its transport (mutual TLS); undefined: unknown so. */
export type PeerIdentity = (context: HandlerContext) => string | undefined;

/** A peer known by its client certificate: the service its SPIFFE ID names in the trust domain. */
export function certificateIdentity(trustDomain: string): PeerIdentity {
  return (context) => {
    const certificate = peerCertificateOf(context);
    return certificate ? serviceNamedBy(certificate, trustDomain) : undefined;
  };
}

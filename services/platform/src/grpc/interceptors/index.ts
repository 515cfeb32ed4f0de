// The services' interceptor chain. Every call a service serves goes through, outermost first:
//
//   telemetry      metrics, server span, log lines                                   (telemetry.ts)
//   deadline       the server's deadline; how a stream ends                          (deadline.ts)
//   admission      load shedding (the service's own methods; never health)           (admission.ts)
//   domainErrors   a refusal (DomainError: a rule's, a store's) → its gRPC status    (domain-errors.ts)
//   …the service's own, declared beside its call policy (services/<name>/src/rpc-handlers.ts):
//   authentication the caller, as the method's call policy entry says                (authentication.ts)
//   idempotencyKeys the Idempotency-Key rules of the methods that take one           (idempotency-keys.ts)
//   → the handler, which does only its own work.
//
// Each is made once per method when the service is registered, and each method's chain composed once
// (chain.ts): a call pays only for the steps its method has.
import { admission, type Admission } from "./admission.js";
import type { ServiceInterceptor } from "./chain.js";
import { deadline } from "./deadline.js";
import { domainErrors } from "./domain-errors.js";
import { telemetry, type RpcObserver } from "./telemetry.js";

export { admission, deadline, domainErrors, telemetry, type Admission, type RpcObserver };
export { authentication } from "./authentication.js";
export { idempotencyKeys, type IdempotencyKeyRule, type IdempotencyKeyRules } from "./idempotency-keys.js";
export {
  composeChain,
  type CallHandler,
  type Interceptor,
  type ServerCall,
  type ServerTraits,
  type ServiceInterceptor,
} from "./chain.js";

/** What the server brings to every chain: where calls are reported, and (for the service's own methods) what sheds. */
export interface ServerSteps {
  observer: RpcObserver;
  /** Absent: calls are never shed (health, reflection; a server without a guard). */
  admission?: Admission | undefined;
}

/** A service's whole chain, outermost first: the server's steps, domain errors → status, the service's own. */
export function serviceChain(server: ServerSteps, declared: readonly ServiceInterceptor[]): ServiceInterceptor[] {
  const shedding = server.admission ? [admission(server.admission)] : [];
  return [telemetry(server.observer), deadline, ...shedding, domainErrors, ...declared];
}

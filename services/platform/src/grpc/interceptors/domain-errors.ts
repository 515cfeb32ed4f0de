// The handler boundary: a refusal (a DomainError: the catalogue's reason, no transport in it — a domain
// rule's, a store's, an Idempotency-Key's) becomes its gRPC status error here, once — the catalogue's
// code and an ErrorInfo with the reason and its details — as the gateway maps a status to HTTP once.
// Inside the server's steps, so that each of them (telemetry's code and log line, a stream's end) sees
// the status the caller will get; outside the service's own (authentication, Idempotency-Key rules),
// whose refusals it maps too.
import { statusErrorOf } from "../../errors.js";
import type { Interceptor, ServiceInterceptor } from "./chain.js";

const asStatus = (err: unknown): never => {
  throw statusErrorOf(err);
};

const mapped: Interceptor = (next) => (call) => {
  let answer: unknown;
  try {
    answer = next(call);
  } catch (err) {
    return asStatus(err);
  }
  return answer instanceof Promise ? answer.then(undefined, asStatus) : answer;
};

export const domainErrors: ServiceInterceptor = () => mapped;

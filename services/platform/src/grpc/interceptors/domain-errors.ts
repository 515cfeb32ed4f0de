// The handler boundary: a domain rule's refusal (a DomainError: the catalogue's reason, no transport in
// it) becomes its gRPC status error here, once — the catalogue's code and an ErrorInfo with the reason
// and its details — as the gateway maps a status to HTTP once. The innermost step, so that every other
// one (telemetry's code and log line, a stream's end) sees the status the caller will get.
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

// Load shedding: a call is refused at once (UNAVAILABLE / LOAD_SHED, load-shed.ts) while the process
// is saturated, before any of its work — its credential's check included — begins.
import type { Interceptor, ServiceInterceptor } from "./chain.js";

/** What decides: refuses by throwing (EventLoopGuard). */
export interface Admission {
  admit(): void;
}

export function admission(guard: Admission): ServiceInterceptor {
  const admitted: Interceptor = (next) => (call) => {
    guard.admit();
    return next(call);
  };
  return () => admitted;
}

// Load shedding: a call is refused at once (UNAVAILABLE / LOAD_SHED, load-shed.ts) while the process
// is saturated, before any of its work — its credential's check included — begins; the least
// valuable first (its priority, as the caller sent it: sheddable, then default, critical last).
import type { Priority } from "../../priority.js";
import { priorityOf } from "../handler-context.js";
import type { Interceptor, ServiceInterceptor } from "./chain.js";

/** What decides: refuses by throwing (EventLoopGuard). */
export interface Admission {
  admit(priority: Priority): void;
}

export function admission(guard: Admission): ServiceInterceptor {
  const admitted: Interceptor = (next) => (call) => {
    guard.admit(priorityOf(call.context));
    return next(call);
  };
  return () => admitted;
}

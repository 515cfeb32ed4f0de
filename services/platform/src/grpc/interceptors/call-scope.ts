// The call's deadline and request id, for all the work beneath it (call-deadline.ts): the store gives
// its statements no more time than the caller has, and log lines and the calls passed on carry the
// id. The outermost step, so that the chain's own log lines (telemetry's) carry it too.
import { withCallScope } from "../../call-deadline.js";
import { deadlineOf, requestIdOf } from "../handler-context.js";
import type { Interceptor, ServiceInterceptor } from "./chain.js";

const inCallScope: Interceptor = (next) => (call) =>
  withCallScope(deadlineOf(call.context), requestIdOf(call.context), () => next(call));

export const callScope: ServiceInterceptor = () => inCallScope;

// The call's deadline, request id and priority, for all the work beneath it (call-deadline.ts): the
// store gives its statements no more time than the caller has, log lines carry the id, and the calls
// passed on carry the id and the priority. The outermost step, so that the chain's own log lines (telemetry's) carry it too.
import { withCallScope } from "../../call-deadline.js";
import { deadlineOf, priorityOf, requestIdOf } from "../handler-context.js";
import type { Interceptor, ServiceInterceptor } from "./chain.js";

const inCallScope: Interceptor = (next) => (call) =>
  withCallScope(
    { deadlineAt: deadlineOf(call.context), requestId: requestIdOf(call.context), priority: priorityOf(call.context) },
    () => next(call),
  );

export const callScope: ServiceInterceptor = () => inCallScope;

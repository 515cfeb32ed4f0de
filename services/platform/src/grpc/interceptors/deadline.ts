// A call ends in time, and says how it ended. A call that answers once ends DEADLINE_EXCEEDED at the
// server's own deadline (deadline-policy.ts: a default for a call sent without one, a ceiling for a
// longer one — grpc-js enforces only the caller's): its signal aborts, so the work beneath it stops,
// whenever its handler would have answered. A stream the server ended first (its credential gone, the
// server shutting down) ends with that reason whatever its handler threw on the way out, and one whose
// handler returned once its deadline passed was cut, not finished: it ends DEADLINE_EXCEEDED, not OK.
import { cutByDeadline, deadlineExceeded, endCall, endedBy, serverDeadlineOf } from "../handler-context.js";
import { settle, streamsAnswers, type Interceptor, type ServiceInterceptor } from "./chain.js";

const byServerDeadline: Interceptor = (next) => (call) => {
  const at = serverDeadlineOf(call.context);
  if (at === undefined) return next(call);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => {
        const reason = deadlineExceeded();
        endCall(call.context, reason);
        reject(reason);
      },
      Math.max(0, at - Date.now()),
    );
    Promise.resolve()
      .then(() => next(call))
      .then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
  });
};

const streamEnd: Interceptor = (next) => (call) =>
  settle(
    next,
    call,
    () => {
      const reason = endedBy(call.context) ?? cutByDeadline(call.context);
      if (reason !== undefined) throw reason;
    },
    (err: unknown) => {
      throw endedBy(call.context) ?? err;
    },
  );

export const deadline: ServiceInterceptor = (method) => (streamsAnswers(method) ? streamEnd : byServerDeadline);

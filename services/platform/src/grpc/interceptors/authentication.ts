// Authentication and the caller: before a handler runs, the call's credentials are checked against its
// method's entry in the service's call policy (../call-policy.ts, checked in ../authentication.ts) and
// the verified caller is put in the call's context, where the handler reads it (callerOf). A live
// stream ends when the credential it was opened with stops being good.
import type { DescService } from "@bufbuild/protobuf";
import { authenticationFor, type AuthenticationPolicy } from "../authentication.js";
import { endCall } from "../handler-context.js";
import { streamsAnswers, type Interceptor, type ServiceInterceptor } from "./chain.js";

export function authentication<S extends DescService>(policy: AuthenticationPolicy<S>): ServiceInterceptor {
  return (method, server): Interceptor | undefined => {
    const authenticate = authenticationFor(policy, method, server.peer);
    if (!authenticate) return undefined;
    if (streamsAnswers(method)) {
      return (next) => async (call) => {
        const unwatch = await authenticate(call.context, (reason) => endCall(call.context, reason));
        try {
          return await next(call);
        } finally {
          unwatch();
        }
      };
    }
    return (next) => (call) => {
      const checked = authenticate(call.context);
      // A caller known at once (most calls: a token seen before) is admitted without a promise.
      return checked instanceof Promise ? checked.then(() => next(call)) : next(call);
    };
  };
}

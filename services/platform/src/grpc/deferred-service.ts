// A service registered before it can serve: the process listens at once (its liveness answers while
// it waits for its database), and the calls that reach the service meanwhile wait for it — as a
// client's wait-for-ready call waits for a connection — until it is served, then run as any other.
// A call whose deadline comes first is answered UNAVAILABLE / STORE_UNAVAILABLE just before it: it
// was never run. A caller reaching a starting replica (a static address list, a restart) so costs
// time, not its answer.
import type { ServiceDefinition, UntypedHandleCall, UntypedServiceImplementation } from "@grpc/grpc-js";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { methodDefinition } from "./service-adapter.js";
import { statusFromError } from "./status-details.js";

/** The most calls that wait for one starting service; more are refused at once. */
const MAX_WAITING = 1_000;
/** A waiting call is answered this long before its deadline, so that the answer arrives in time. */
const ANSWER_MARGIN_MS = 50;

export interface DeferredService {
  readonly definition: ServiceDefinition;
  readonly implementation: UntypedServiceImplementation;
  /** From now on every call runs on `handlers` (an adapted service's), the waiting ones first. */
  serve(handlers: UntypedServiceImplementation): void;
}

type GrpcCall = {
  cancelled?: boolean;
  getDeadline(): Date | number;
  once(event: "cancelled", listener: () => void): unknown;
  emit(event: "error", status: unknown): boolean;
};

/** Ends a call that never ran with `err`: through its callback when it answers once, else on its stream. */
function refuse(method: DescMethod, args: unknown[], err: ConnectError): void {
  const status = statusFromError(err);
  if (method.methodKind === "unary" || method.methodKind === "client_streaming")
    (args[1] as (status: unknown) => void)(status);
  else (args[0] as GrpcCall).emit("error", status);
}

export function deferredService(service: DescService, refusal: () => ConnectError): DeferredService {
  let handlers: UntypedServiceImplementation | undefined;
  const waiting = new Set<() => void>();
  const definition: Record<string, ReturnType<typeof methodDefinition>> = {};
  const implementation: UntypedServiceImplementation = {};
  for (const method of service.methods) {
    definition[method.name] = methodDefinition(method);
    const run = (args: unknown[]) => {
      const handler = handlers![method.name] as ((...a: unknown[]) => void) | undefined;
      // A method the service does not implement: as grpc-js answers one it has never heard of.
      if (!handler) return refuse(method, args, unimplemented(method));
      handler(...args);
    };
    implementation[method.name] = ((...args: unknown[]) => {
      if (handlers) return run(args);
      if (waiting.size >= MAX_WAITING) return refuse(method, args, refusal());
      const call = args[0] as GrpcCall;
      const deadline = call.getDeadline();
      const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
      let timer: NodeJS.Timeout | undefined;
      const resume = () => {
        clearTimeout(timer);
        waiting.delete(resume);
        if (!call.cancelled) run(args);
      };
      waiting.add(resume);
      call.once("cancelled", () => {
        clearTimeout(timer);
        waiting.delete(resume);
      });
      if (Number.isFinite(deadlineMs))
        timer = setTimeout(
          () => {
            waiting.delete(resume);
            if (!call.cancelled) refuse(method, args, refusal());
          },
          Math.max(0, deadlineMs - Date.now() - ANSWER_MARGIN_MS),
        );
    }) as UntypedHandleCall;
  }
  return {
    definition: definition,
    implementation,
    serve(served) {
      handlers = served;
      for (const resume of [...waiting]) resume();
    },
  };
}

function unimplemented(method: DescMethod): ConnectError {
  return new ConnectError(`${method.parent.typeName}/${method.name} is not implemented`, Code.Unimplemented);
}

// grpc.health.v1.Health: Check, Watch and List over one status table. The bootstrap marks every
// service SERVING once it listens and NOT_SERVING when draining, so load balancers stop routing first.
import { EventEmitter, on } from "node:events";
import type { ServiceImpl } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { fail } from "../errors.js";

export { ServingStatus };

export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly changes = new EventEmitter();

  constructor() {
    this.changes.setMaxListeners(0);
  }

  set(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    this.changes.emit("change", service);
  }

  /** Sets the overall status ("") and every named service at once. */
  setAll(status: ServingStatus): void {
    for (const service of [...this.statuses.keys(), ""]) this.set(service, status);
  }

  get(service: string): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  impl(): ServiceImpl<typeof Health> {
    const self = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the handlers are methods of the object below
    return {
      check(req) {
        const status = self.get(req.service);
        if (status === undefined) throw fail("NOT_FOUND", `unknown service ${req.service}`);
        return { status };
      },
      async *watch(req, ctx) {
        const changes = on(self.changes, "change", { signal: ctx.signal });
        let last: ServingStatus | undefined;
        const current = () => self.get(req.service) ?? ServingStatus.SERVICE_UNKNOWN;
        last = current();
        yield { status: last };
        try {
          for await (const [service] of changes) {
            if (service !== req.service) continue;
            const now = current();
            if (now !== last) yield { status: (last = now) };
          }
        } catch (err) {
          if (!ctx.signal.aborted) throw err;
        }
      },
      list() {
        return { statuses: Object.fromEntries([...self.statuses].map(([name, status]) => [name, { status }])) };
      },
    };
  }
}

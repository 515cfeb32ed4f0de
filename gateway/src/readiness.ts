// /readyz: the gateway is ready while it serves — it started, and is not draining. Draining before
// exit takes it out of rotation, so no new work is sent here. Each upstream's state over
// grpc.health.v1 is told for operators but does not decide readiness: one service down makes only that
// service's routes answer 502/503, not the whole edge leave the load balancer.
import type { ServerResponse } from "node:http";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { createServiceClient } from "@switchyard/platform/grpc";
import { sendJson, type ResponseHeaders } from "./runtime/respond.js";
import type { Upstreams } from "./upstreams.js";

export class Readiness {
  private draining = false;
  private readonly healthClients;

  constructor(channels: Upstreams["channels"]) {
    this.healthClients = Object.entries(channels).map(
      ([name, channel]) => [name, createServiceClient(Health, channel)] as const,
    );
  }

  /** From now on /readyz answers 503 "draining". */
  drain(): void {
    this.draining = true;
  }

  async answer(res: ServerResponse, headers: ResponseHeaders): Promise<void> {
    if (this.draining)
      return sendJson(res, { status: 503, body: { status: "draining" }, headers, extra: { "retry-after": "1" } });
    sendJson(res, { status: 200, body: { status: "ready", upstreams: await this.upstreamStates() }, headers });
  }

  private async upstreamStates(): Promise<Record<string, string>> {
    const clients = this.healthClients;
    const checks = await Promise.allSettled(clients.map(([, h]) => h.check({ service: "" }, { timeoutMs: 1_000 })));
    return Object.fromEntries(
      checks.map((c, i) => [
        clients[i]![0],
        c.status === "fulfilled" ? HealthCheckResponse_ServingStatus[c.value.status] : "UNREACHABLE",
      ]),
    );
  }
}

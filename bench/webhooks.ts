// Issue 45 part 9: webhooks on an idle mesh (embedded storage). (1) Commit → first attempt: payments
// created one at a time through the gateway, each timed from the POST's 201 to the moment a local
// receiver gets its payment.succeeded (goal p99 ≤ 1 s). (2) Delivery rate of one webhooks replica: a
// backlog of payments made while the webhooks service is stopped, then delivered to the receiver
// (answering 204 at once) once it is back — events per second from the first delivery to the last.
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Latencies } from "./load/latency.js";
import { watchCpu } from "./machine.js";
import { PAYMENT_BODY, startMeshFixture, type MeshFixture } from "./mesh-fixture.js";
import { NO_TARGET, type SummaryRow } from "./summary.js";

/** Issue 45's goal for a payment's event reaching its endpoint on an idle mesh. */
export const WEBHOOK_P99_TARGET_MS = 1_000;
/** Payments timed one at a time (BENCH_WEBHOOK_PAYMENTS), and the backlog delivered (BENCH_WEBHOOK_BACKLOG). */
const DEFAULTS = { payments: 200, backlog: 2_000 };
/** Payments created at once while the backlog is built. */
const CREATE_CONCURRENCY = 16;
const DELIVERY_TIMEOUT_MS = 10_000;

export interface WebhooksBenchResult {
  payments: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  backlog: number;
  /** First to last delivery of the backlog. */
  deliverySeconds: number;
  eventsPerSec: number;
  /** Deliveries the receiver got more than once (at least once: allowed, counted). */
  repeats: number;
  /** Share of the machine's CPU others used while the backlog was delivered. */
  otherCpuPct: number | undefined;
}

/** A partner's receiver: 204 at once, the time of each event's first arrival, by its payment's id. */
class Receiver {
  readonly arrivals = new Map<string, number>();
  repeats = 0;
  requests = 0;
  private readonly waiting = new Map<string, () => void>();
  private server: Server | undefined;

  async start(): Promise<string> {
    const seen = new Set<string>();
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = performance.now();
        this.requests++;
        res.writeHead(204).end();
        const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: string; data?: { id?: string } };
        if (seen.has(event.id)) return void this.repeats++;
        seen.add(event.id);
        const paymentId = event.data?.id;
        if (paymentId === undefined) return;
        this.arrivals.set(paymentId, at);
        this.waiting.get(paymentId)?.();
      });
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  /** Resolves when the payment's event has arrived (at once if it has). */
  arrival(paymentId: string, timeoutMs: number): Promise<number> {
    const at = this.arrivals.get(paymentId);
    if (at !== undefined) return Promise.resolve(at);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(paymentId);
        reject(new Error(`payment ${paymentId}'s event did not arrive within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(paymentId, () => {
        clearTimeout(timer);
        this.waiting.delete(paymentId);
        resolve(this.arrivals.get(paymentId)!);
      });
    });
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

async function createPayment(mesh: MeshFixture): Promise<{ id: string; answeredAt: number }> {
  const res = await fetch(`${mesh.gatewayUrl}/v1/payments`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${mesh.token}`,
      "idempotency-key": randomUUID(),
    },
    body: PAYMENT_BODY,
  });
  const answeredAt = performance.now();
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST /v1/payments → ${res.status}: ${text}`);
  return { id: String((JSON.parse(text) as { id: unknown }).id), answeredAt };
}

async function registerEndpoint(mesh: MeshFixture, url: string): Promise<void> {
  const res = await fetch(`${mesh.gatewayUrl}/v2/webhook-endpoints`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${mesh.token}`,
      "idempotency-key": randomUUID(),
    },
    body: JSON.stringify({ url, event_types: ["payment.succeeded"] }),
  });
  if (res.status !== 201) throw new Error(`POST /v2/webhook-endpoints → ${res.status}: ${await res.text()}`);
}

export async function measureWebhooks(
  counts: { payments?: number; backlog?: number } = {},
): Promise<WebhooksBenchResult> {
  const payments = counts.payments ?? DEFAULTS.payments;
  const backlog = counts.backlog ?? DEFAULTS.backlog;
  const receiver = new Receiver();
  const url = await receiver.start();
  const mesh = await startMeshFixture({ limit: "none" });
  try {
    await registerEndpoint(mesh, url);
    // The fixture's own payment (made before the endpoint) goes nowhere; a first one warms the path.
    const warm = await createPayment(mesh);
    await receiver.arrival(warm.id, DELIVERY_TIMEOUT_MS * 3);

    const latencies = new Latencies();
    for (let i = 0; i < payments; i++) {
      const made = await createPayment(mesh);
      // Delivered before the client read the answer: 0 (the histogram's floor).
      latencies.record((await receiver.arrival(made.id, DELIVERY_TIMEOUT_MS)) - made.answeredAt);
    }

    await mesh.stopService("webhooks");
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CREATE_CONCURRENCY }, async () => {
        while (next < backlog) {
          next++;
          ids.push((await createPayment(mesh)).id);
        }
      }),
    );
    const cpu = watchCpu();
    await mesh.restartService("webhooks");
    const deadline = performance.now() + Math.max(120_000, backlog * 100);
    for (let missing = ids.length; missing > 0; await sleep(50)) {
      missing = ids.filter((id) => !receiver.arrivals.has(id)).length;
      if (missing > 0 && performance.now() > deadline)
        throw new Error(
          `${missing} of the backlog's ${backlog} events had not arrived in time (${receiver.requests} requests received); the mesh's last words: ${mesh.logs.join("").slice(-1_500)}`,
        );
    }
    const arrivals = ids.map((id) => receiver.arrivals.get(id)!);
    const otherCpuPct = cpu().otherCpuPct;
    const first = Math.min(...arrivals);
    const last = Math.max(...arrivals);
    const deliverySeconds = (last - first) / 1000;
    // Give late repeats a moment to show up before they are counted.
    await sleep(200);
    return {
      payments,
      p50Ms: latencies.percentileMs(50),
      p99Ms: latencies.percentileMs(99),
      maxMs: latencies.maxMs,
      backlog,
      deliverySeconds,
      eventsPerSec: deliverySeconds > 0 ? (backlog - 1) / deliverySeconds : NaN,
      repeats: receiver.repeats,
      otherCpuPct,
    };
  } finally {
    await mesh.stop();
    await receiver.stop();
  }
}

/** The section's counts from BENCH_WEBHOOK_PAYMENTS / BENCH_WEBHOOK_BACKLOG (shorter runs while developing). */
export function webhooksBenchCounts(env: NodeJS.ProcessEnv): { payments: number; backlog: number } {
  const count = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 2) throw new Error(`${name} must be an integer ≥ 2, not "${raw}"`);
    return n;
  };
  return {
    payments: count("BENCH_WEBHOOK_PAYMENTS", DEFAULTS.payments),
    backlog: count("BENCH_WEBHOOK_BACKLOG", DEFAULTS.backlog),
  };
}

export function formatWebhooks(r: WebhooksBenchResult | { error: string } | undefined): string[] {
  const out = [
    "",
    "J. Webhooks on an idle mesh (PGlite) — a payment's POST answered → its payment.succeeded at a local receiver; then one webhooks replica delivering a backlog",
  ];
  if (!r) return [...out, "  not run this time (BENCH_ONLY)"];
  if ("error" in r) return [...out, `  FAILED: ${r.error}`];
  const pass = r.p99Ms <= WEBHOOK_P99_TARGET_MS;
  return [
    ...out,
    `  ${r.payments} payments one at a time: commit → first attempt p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, max ${r.maxMs.toFixed(1)} ms (target p99 ≤ ${WEBHOOK_P99_TARGET_MS} ms → ${pass ? "PASS" : "MISS"})`,
    `  backlog of ${r.backlog.toLocaleString("en")} payments made with the webhooks service stopped, delivered to one endpoint answering 204 at once: ${r.eventsPerSec.toFixed(0)} events/s (first to last delivery ${r.deliverySeconds.toFixed(2)} s; at most 4 in flight per endpoint), ${r.repeats} delivered twice${r.otherCpuPct === undefined ? "" : `  (others' CPU ${r.otherCpuPct.toFixed(0)} %)`}`,
  ];
}

export function webhooksSummaryRows(r: WebhooksBenchResult | { error: string } | undefined): SummaryRow[] {
  const ok = r && !("error" in r) ? r : undefined;
  return [
    {
      issue: "#45",
      figure: "webhooks, idle mesh: payment commit → first attempt p99",
      value: ok && `${ok.p99Ms.toFixed(0)} ms (p50 ${ok.p50Ms.toFixed(0)} ms)`,
      target: `≤ ${WEBHOOK_P99_TARGET_MS} ms`,
      pass: ok !== undefined && ok.p99Ms <= WEBHOOK_P99_TARGET_MS,
    },
    {
      issue: "#45",
      figure: "webhooks: events/s one replica delivers to one endpoint (backlog, 204 at once)",
      value: ok && `${ok.eventsPerSec.toFixed(0)} events/s`,
      target: NO_TARGET,
      pass: undefined,
    },
  ];
}

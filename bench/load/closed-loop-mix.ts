// Closed-loop clients of a mixed load (issue 34): each connection sends its next request when the
// last is answered — a partner's few parallel workers — cycling through 60 % reads of a payment,
// 20 % catalog pages, 10 % payment lists and 10 % new payments. However long they wait behind one
// another, their backlog never grows, so none of them may be shed: the target is at most 0.1 % 503.
import autocannon from "autocannon";
import { randomUUID } from "node:crypto";

/** At most this share of a closed loop's answers may be 503. */
export const CLOSED_LOOP_SHED_TARGET = 0.001;
/** The connections of each run, one after another without a pause. */
export const CLOSED_LOOP_CONNECTIONS = [4, 16, 64] as const;

export interface ClosedLoopMixTarget {
  gatewayUrl: string;
  token: string;
  paymentId: string;
}

export interface ClosedLoopMixResult {
  connections: number;
  seconds: number;
  requests: number;
  reqPerSec: number;
  statusCodes: Record<string, number>;
  /** Share of answers that were 503. */
  shedShare: number;
  /** Answers other than 2xx and 503, and connection errors (each one is a failure of its own). */
  otherFailures: number;
}

/** The ten requests a connection cycles through: the mix. */
function mix(target: ClosedLoopMixTarget): autocannon.Request[] {
  const auth = { authorization: `Bearer ${target.token}` };
  const read = { method: "GET" as const, path: `/v1/payments/${target.paymentId}`, headers: auth };
  return [
    read,
    { method: "GET", path: "/v1/catalog/items?page=1", headers: {} },
    read,
    { method: "GET", path: "/v1/payments?limit=20", headers: auth },
    read,
    {
      method: "POST",
      path: "/v1/payments",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ amount: 1_250, currency: "EUR", source: "tok_closed_loop" }),
      setupRequest: (req: autocannon.Request) => ({
        ...req,
        headers: { ...req.headers, "idempotency-key": randomUUID() },
      }),
    },
    read,
    { method: "GET", path: "/v1/catalog/items?page=2", headers: {} },
    read,
    read,
  ];
}

/** One closed-loop run of `connections` for `seconds`. */
export function measureClosedLoopMix(
  target: ClosedLoopMixTarget,
  connections: number,
  seconds: number,
): Promise<ClosedLoopMixResult> {
  const statusCodes: Record<string, number> = {};
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      { url: target.gatewayUrl, connections, pipelining: 1, duration: seconds, timeout: 10, requests: mix(target) },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const requests = Object.values(statusCodes).reduce((a, b) => a + b, 0);
        const shed = statusCodes["503"] ?? 0;
        const other = Object.entries(statusCodes)
          .filter(([code]) => !code.startsWith("2") && code !== "503")
          .reduce((n, [, count]) => n + count, 0);
        resolve({
          connections,
          seconds: result.duration,
          requests,
          reqPerSec: requests / result.duration,
          statusCodes,
          shedShare: requests > 0 ? shed / requests : 0,
          otherFailures: other + result.errors + result.timeouts,
        });
      },
    );
    instance.on("response", (_client: unknown, statusCode: number) => {
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
    });
  });
}

/** 4, 16 and 64 connections, `secondsEach` each, one after another. */
export async function measureClosedLoops(
  target: ClosedLoopMixTarget,
  secondsEach: number,
): Promise<ClosedLoopMixResult[]> {
  const results: ClosedLoopMixResult[] = [];
  for (const connections of CLOSED_LOOP_CONNECTIONS)
    results.push(await measureClosedLoopMix(target, connections, secondsEach));
  return results;
}

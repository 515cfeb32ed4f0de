// HTTP load with autocannon: a warm-up run (discarded), then the measured run. Every response
// must carry the expected status and no connection may fail, or the scenario fails.
import autocannon from "autocannon";
import { watchCpu } from "../machine.js";
import { Latencies } from "./latency.js";

export interface HttpTarget {
  url: string;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  /** Called for every request: headers to add (a fresh Idempotency-Key, …). */
  perRequestHeaders?: () => Record<string, string>;
  /** Called for every request: its path, in place of the URL's (the next of many orders to pay, …). */
  perRequestPath?: () => string;
  /** Every response must have this status (default 200). */
  expectStatus?: number;
  /**
   * Origins (http://host:port) serving the same request — several gateways of one mesh: the
   * connections are shared out evenly over them, each sent the URL's path. Unset: the URL's own.
   */
  spreadOver?: string[];
}

export interface HttpLoadOptions {
  connections: number;
  seconds: number;
  warmupSeconds: number;
  /** Processes (name → pid) whose CPU time per request is reported one by one. */
  processes?: Record<string, number | undefined>;
}

export interface HttpLoadResult {
  requests: number;
  seconds: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  /** CPU time the server processes spent per request, in ms (all of them: the whole path). */
  serverCpuMsPerRequest?: number | undefined;
  /** The same for each named process of the path (gateway, payments, …). */
  cpuMsPerRequestBy?: Record<string, number> | undefined;
  /** CPU time the load generator (this process) spent per request, in ms. */
  loadGeneratorCpuMsPerRequest?: number | undefined;
  /** Share of the machine's CPU used by processes outside the benchmark meanwhile (noise). */
  otherCpuPct?: number | undefined;
}

/**
 * One closed-loop run: every response must have the expected status. For `seconds`, or — given
 * `amount` — until that many requests are answered (autocannon prepares up to one more per
 * connection than it sends: a target whose requests use something up needs that much spare).
 */
export function fire(
  target: HttpTarget,
  connections: number,
  seconds: number,
  amount?: number,
): Promise<HttpLoadResult> {
  if (target.spreadOver && target.spreadOver.length > 1)
    return fireSpread(target, target.spreadOver, connections, seconds, amount);
  return fireOne(target, connections, seconds, amount);
}

/** One run over several origins at once: their answers added up, their latencies the worst of theirs. */
async function fireSpread(
  target: HttpTarget,
  origins: string[],
  connections: number,
  seconds: number,
  amount?: number,
): Promise<HttpLoadResult> {
  const { pathname, search } = new URL(target.url);
  const share = (i: number, n: number) => Math.floor(n / origins.length) + (i < n % origins.length ? 1 : 0);
  const parts = await Promise.all(
    origins.map((origin, i) =>
      fireOne(
        { ...target, url: `${origin}${pathname}${search}` },
        share(i, connections),
        seconds,
        amount === undefined ? undefined : share(i, amount),
      ),
    ),
  );
  const statusCodes: Record<string, number> = {};
  for (const part of parts)
    for (const [code, n] of Object.entries(part.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
  const requests = parts.reduce((sum, p) => sum + p.requests, 0);
  const elapsed = Math.max(...parts.map((p) => p.seconds));
  return {
    requests,
    seconds: elapsed,
    reqPerSec: requests / elapsed,
    p50Ms: Math.max(...parts.map((p) => p.p50Ms)),
    p99Ms: Math.max(...parts.map((p) => p.p99Ms)),
    non2xx: parts.reduce((sum, p) => sum + p.non2xx, 0),
    statusCodes,
  };
}

function fireOne(target: HttpTarget, connections: number, seconds: number, amount?: number): Promise<HttpLoadResult> {
  const latencies = new Latencies();
  const statusCodes: Record<string, number> = {};
  const { perRequestHeaders: headersOf, perRequestPath: pathOf } = target;
  const setupRequest =
    headersOf || pathOf
      ? (req: autocannon.Request) => ({
          ...req,
          ...(headersOf ? { headers: { ...req.headers, ...headersOf() } } : {}),
          ...(pathOf ? { path: pathOf() } : {}),
        })
      : undefined;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        connections,
        pipelining: 1,
        duration: seconds,
        ...(amount === undefined ? {} : { amount }),
        timeout: 10,
        requests: [
          {
            method: target.method ?? "GET",
            headers: target.headers ?? {},
            ...(target.body === undefined ? {} : { body: target.body }),
            ...(setupRequest ? { setupRequest } : {}),
          },
        ],
      },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const expected = String(target.expectStatus ?? 200);
        const unexpected = Object.entries(statusCodes).filter(([code]) => code !== expected);
        if (
          result.errors > 0 ||
          result.timeouts > 0 ||
          result.non2xx > 0 ||
          unexpected.length > 0 ||
          latencies.count === 0
        ) {
          return reject(
            new Error(
              `${target.method ?? "GET"} ${target.url}: expected only ${expected}, got statuses ${JSON.stringify(statusCodes)}, non-2xx ${result.non2xx}, connection errors ${result.errors} (timeouts ${result.timeouts})`,
            ),
          );
        }
        resolve({
          requests: latencies.count,
          seconds: result.duration,
          reqPerSec: latencies.count / result.duration,
          p50Ms: latencies.percentileMs(50),
          p99Ms: latencies.percentileMs(99),
          non2xx: result.non2xx,
          statusCodes,
        });
      },
    );
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      latencies.record(responseTime);
    });
  });
}

export async function measureHttp(target: HttpTarget, options: HttpLoadOptions): Promise<HttpLoadResult> {
  await fire(target, options.connections, options.warmupSeconds);
  const cpu = watchCpu(options.processes);
  const result = await fire(target, options.connections, options.seconds);
  const { serverCpuMs, byProcessMs, selfCpuMs, otherCpuPct } = cpu();
  const perRequest = (ms: number) => ms / result.requests;
  return {
    ...result,
    serverCpuMsPerRequest: serverCpuMs === undefined ? undefined : perRequest(serverCpuMs),
    cpuMsPerRequestBy:
      byProcessMs && Object.fromEntries(Object.entries(byProcessMs).map(([name, ms]) => [name, perRequest(ms)])),
    loadGeneratorCpuMsPerRequest: selfCpuMs === undefined ? undefined : perRequest(selfCpuMs),
    otherCpuPct,
  };
}

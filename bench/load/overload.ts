// Overload: the read path driven at a multiple of the in-flight load it was measured at. The
// gateway must shed what it cannot serve (503 + Retry-After, at once) so that the requests it
// admits keep their latency: admitted p99 within 2× of the p99 measured without overload.
import autocannon from "autocannon";
import { Latencies } from "./latency.js";

export interface OverloadResult {
  connections: number;
  seconds: number;
  admittedPerSec: number;
  admittedP99Ms: number;
  shed: number;
  shedP99Ms: number;
  shedWithRetryAfter: number;
  other: Record<string, number>;
}

export function measureOverload(url: string, headers: Record<string, string>, connections: number, seconds: number): Promise<OverloadResult> {
  const admitted = new Latencies();
  const shed = new Latencies();
  const other: Record<string, number> = {};
  let shedWithRetryAfter = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon({ url, connections, pipelining: 1, duration: seconds, timeout: 10, headers }, (err: unknown, result: autocannon.Result) => {
      if (err) return reject(err instanceof Error ? err : new Error(String(err)));
      if (admitted.count === 0) return reject(new Error(`no request was admitted under overload (${JSON.stringify(other)})`));
      resolve({
        connections,
        seconds: result.duration,
        admittedPerSec: admitted.count / result.duration,
        admittedP99Ms: admitted.percentileMs(99),
        shed: shed.count,
        shedP99Ms: shed.percentileMs(99),
        shedWithRetryAfter,
        other,
      });
    });
    instance.on("response", (client, statusCode, _bytes, responseTime) => {
      if (statusCode === 200) admitted.record(responseTime);
      else if (statusCode === 503) {
        shed.record(responseTime);
        const raw = (client as unknown as { parser?: { info?: { headers?: string[] } } }).parser?.info?.headers;
        if (!raw || raw.some((h) => /^retry-after$/i.test(h))) shedWithRetryAfter++;
      } else other[statusCode] = (other[statusCode] ?? 0) + 1;
    });
  });
}

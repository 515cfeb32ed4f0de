// A closed-loop load generator for unary calls: `concurrency` calls always in flight (a new one
// starts as soon as one ends) for a fixed time; counts calls/s and the latency distribution.
import { performance } from "node:perf_hooks";
import { watchCpu } from "../machine.js";
import { Latencies } from "./latency.js";

export interface LoadOptions {
  concurrency: number;
  seconds: number;
  warmupSeconds: number;
}

export interface GrpcLoadResult {
  calls: number;
  seconds: number;
  callsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU time the server processes spent per request, in ms (all of them: the whole path). */
  serverCpuMsPerRequest?: number | undefined;
  /** Share of the machine's CPU used by processes outside the benchmark meanwhile (noise). */
  otherCpuPct?: number | undefined;
}

async function closedLoop(call: () => Promise<unknown>, concurrency: number, seconds: number): Promise<GrpcLoadResult> {
  const latencies = new Latencies();
  const start = performance.now();
  const end = start + seconds * 1_000;
  let firstError: unknown;
  let errors = 0;
  const worker = async () => {
    while (performance.now() < end && firstError === undefined) {
      const t0 = performance.now();
      try {
        await call();
        latencies.record(performance.now() - t0);
      } catch (err) {
        errors++;
        firstError ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (firstError !== undefined)
    throw new Error(
      `${errors} call(s) failed, first: ${firstError instanceof Error ? firstError.message : String(firstError)}`,
    );
  const elapsed = (performance.now() - start) / 1_000;
  return {
    calls: latencies.count,
    seconds: elapsed,
    callsPerSec: latencies.count / elapsed,
    p50Ms: latencies.percentileMs(50),
    p99Ms: latencies.percentileMs(99),
  };
}

/** A warm-up run (discarded), then the measured run. Any failed call fails the scenario. */
export async function measureCalls(call: () => Promise<unknown>, options: LoadOptions): Promise<GrpcLoadResult> {
  await closedLoop(call, options.concurrency, options.warmupSeconds);
  const cpu = watchCpu();
  const result = await closedLoop(call, options.concurrency, options.seconds);
  const { serverCpuMs, otherCpuPct } = cpu();
  return {
    ...result,
    serverCpuMsPerRequest: serverCpuMs === undefined ? undefined : serverCpuMs / result.calls,
    otherCpuPct,
  };
}

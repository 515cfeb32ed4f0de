// Overload: the read path offered three times its capacity, open loop (clients keep arriving
// whether or not earlier ones were answered), against a gateway with its default adaptive
// concurrency limit. The gateway must shed what it cannot serve — 503 + Retry-After, at once — so
// that the requests it admits keep their latency: admitted p99 within 2× the p99 without load.
// The same open-loop generator measures the reference points: a light load (a tenth of capacity:
// "unloaded") and exactly the capacity.
import { measureOpenLoop, type OpenLoopResult, type OpenLoopTarget } from "./open-loop.js";
import { cpuSeconds } from "../machine.js";
import type { ClosedLoopMixResult } from "./closed-loop-mix.js";

export const OVERLOAD_FACTOR = 3;
export const UNLOADED_FACTOR = 0.1;
/** Admitted p99 under overload ÷ p99 unloaded must stay at or below this. */
export const OVERLOAD_P99_TARGET = 2;
/** Goodput (2xx per second) ÷ capacity under overload must reach this. */
export const GOODPUT_TARGET = 0.75;
const SOCKETS = 256;
/** The unloaded run lasts this many times the others. */
const UNLOADED_RUN_LENGTH = 3;

/**
 * For reference, the same overload against a gateway whose limit is pinned at one request at a
 * time — the fewest a limit can admit. Whether even that meets the target tells the machine's part
 * (what shedding and the load generator cost at 3×) from the adaptive limit's.
 */
export const PINNED_LIMIT = 1;

export interface OverloadResult {
  /** Requests per second the path served at 50 connections without shedding (scenario 3). */
  capacityPerSec: number;
  unloaded: OpenLoopResult;
  atCapacity: OpenLoopResult;
  overload: OpenLoopResult;
  /** The overload against the limit pinned at PINNED_LIMIT (another mesh). */
  pinned?: OpenLoopResult | { error: string };
  /** The overload's rate against a bare node:http server that answers every request with a shed's 503 (bench/servers/fixed-shed.ts), and its CPU per answer. */
  shedFloor?: (OpenLoopResult & { serverCpuUsPerAnswer?: number }) | { error: string };
  /** The same-work reference (no limit, nothing shed) under the same open loop: unloaded, and at the goodput target's rate. */
  sameWork?: ServedReference | { error: string };
  /** Closed-loop clients of the mixed load (4, 16, 64 connections) on the same mesh, after the open loop. */
  closedLoops?: ClosedLoopMixResult[] | { error: string };
}

/** At 1× the capacity (open loop) the limit admits at least this share of the requests. */
export const AT_CAPACITY_ADMITTED_TARGET = 0.9;
/** A shed answer's p99 at 3× within this multiple of the floor's (a bare node:http server answering only the shed). */
export const SHED_P99_FLOOR_TARGET = 2;

export interface ServedReference {
  unloaded: OpenLoopResult;
  /** At GOODPUT_TARGET × the mesh's capacity: what the mesh must serve at 3×, served by a path doing only the same work. */
  atGoodputTarget: OpenLoopResult;
}

const runAt = (target: OpenLoopTarget, capacityPerSec: number, factor: number, seconds: number) =>
  measureOpenLoop(target, { rate: capacityPerSec * factor, seconds, sockets: SOCKETS });
/** A run at a third of capacity before measuring: compiled code, warm connections (and a limit's first lessons). */
const warmUp = (target: OpenLoopTarget, capacityPerSec: number, seconds: number) =>
  runAt(target, capacityPerSec, 0.3, seconds);

export async function measureOverload(
  target: OpenLoopTarget,
  capacityPerSec: number,
  seconds: number,
): Promise<OverloadResult> {
  const run = (factor: number, s = seconds) => runAt(target, capacityPerSec, factor, s);
  // Longer here: the limit learns the latency without a queue from the quieter requests of that load.
  await warmUp(target, capacityPerSec, 7);
  // A tenth of capacity sends a tenth of the requests: run longer, so that its p99 — the reference
  // the target divides by — rests on a few thousand samples, not on the slowest nine or so of 900.
  const unloaded = await run(UNLOADED_FACTOR, seconds * UNLOADED_RUN_LENGTH);
  const atCapacity = await run(1);
  const overload = await run(OVERLOAD_FACTOR);
  return { capacityPerSec, unloaded, atCapacity, overload };
}

/**
 * The overload alone, against a gateway with its limit pinned or the shed floor's server (no latency
 * measurements to warm up for). With `serverPid`, also the CPU time that process spent per answer.
 */
export async function measurePinnedOverload(
  target: OpenLoopTarget,
  capacityPerSec: number,
  seconds: number,
  serverPid?: number,
): Promise<OpenLoopResult & { serverCpuUsPerAnswer?: number }> {
  await warmUp(target, capacityPerSec, 3);
  const before = serverPid === undefined ? 0 : cpuSeconds(serverPid);
  const result = await runAt(target, capacityPerSec, OVERLOAD_FACTOR, seconds);
  if (serverPid === undefined) return result;
  const answers = Object.values(result.byStatus).reduce((n, s) => n + s.count, 0);
  return {
    ...result,
    serverCpuUsPerAnswer: answers > 0 ? ((cpuSeconds(serverPid) - before) * 1e6) / answers : undefined,
  };
}

/**
 * A path that serves everything (no limit) under the same open loop: unloaded, and at the rate the
 * goodput target asks the mesh to serve at 3×. Whether its own p99 stays within OVERLOAD_P99_TARGET
 * there tells whether serving that much with that tail is possible on this machine at all.
 */
export async function measureServedReference(
  target: OpenLoopTarget,
  capacityPerSec: number,
  seconds: number,
): Promise<ServedReference> {
  await warmUp(target, capacityPerSec, 3);
  const unloaded = await runAt(target, capacityPerSec, UNLOADED_FACTOR, seconds * UNLOADED_RUN_LENGTH);
  const atGoodputTarget = await runAt(target, capacityPerSec, GOODPUT_TARGET, seconds);
  return { unloaded, atGoodputTarget };
}

/** C·shed: the share of the core a shed costs, counted in served requests' worth (capacity × its CPU time). */
const shedShare = (capacityPerSec: number, shedCpuUs: number) => (capacityPerSec * shedCpuUs) / 1e6;

/**
 * The most goodput ÷ capacity that OVERLOAD_FACTOR× allows when a shed answer costs `shedCpuUs` of the
 * core that serves `capacityPerSec`: the served share s and the shed rest fill the core,
 * s + (F − s)·C·shed = 1, so s = (1 − F·C·shed) ÷ (1 − C·shed).
 */
export function goodputCeiling(capacityPerSec: number, shedCpuUs: number): number {
  const x = shedShare(capacityPerSec, shedCpuUs);
  return Math.max(0, (1 - OVERLOAD_FACTOR * x) / (1 - x));
}

/**
 * The share of the core that a goodput of `goodput` × capacity takes at OVERLOAD_FACTOR× when a shed
 * answer costs `shedCpuUs`: the served share plus the shed rest, g + (F − g)·C·shed. What is left is
 * the room a queue has: near 1, every answer — a shed one too — waits behind the others.
 */
export function coreShareForGoodput(capacityPerSec: number, shedCpuUs: number, goodput: number): number {
  const x = shedShare(capacityPerSec, shedCpuUs);
  return goodput + (OVERLOAD_FACTOR - goodput) * x;
}

// Comparing paths whose difference is smaller than this machine's noise. On a shared VM the speed of
// allocation-heavy work drifts by tens of percent within minutes, and one process start runs a few
// percent faster or slower than the next for its whole life (JIT and heap layout). Measuring one side
// after the other mixes both into the comparison. Here every side runs at once (idle while not
// loaded), the load moves between them in short slices, in alternating order, so that a drift falls
// on all of them alike; and the whole is repeated on fresh processes (`starts`), so that one lucky or
// unlucky start does not decide it. Each side's figure is the sum over all its slices.
//
// Targets that are compared only with one another form a group (`groupOf`): a group's rounds all run
// before the next group's begin. A slice pays for what the slice before it left behind — after the
// edge cache's document reads at ~35,000 req/s the gateway's heap holds that burst's promoted garbage,
// and the payment read measured next cost 0.18 ms of gateway CPU instead of 0.15 (its ratio to the
// reference fell from 0.92 to 0.80; after the same reads at a single connection it did not) — so a
// target is measured after its own group's slices, never after another's.
import { watchCpu } from "../machine.js";
import { fire, type HttpLoadResult, type HttpTarget } from "./http-load.js";

/** What one start of a side brings up: its load targets, its processes (for CPU), and how to stop it. */
export interface Setup {
  targets: Record<string, HttpTarget>;
  processes: Record<string, number | undefined>;
  stop(): Promise<void>;
}

export interface InterleavedOptions {
  /** Fresh starts of every side; the figures add up over all of them. */
  starts: number;
  /** Slices per target and start, in alternating order. */
  rounds: number;
  sliceSeconds: number;
  warmupSeconds: number;
  /**
   * Each slice is preceded by this much load of its own target, not measured, so that every side is
   * measured loaded, as the slice before it left it or not. Without it a side with several targets
   * (the reference's R and R+, one set of processes) has its slices follow its own load, while a side
   * with one (the mesh) has half of its slices follow seconds of idle. Default 0.
   */
  leadInSeconds?: number;
  connections: number;
  /** Called before each start, for progress lines. */
  onStart?: (start: number) => void;
  /** The group of a target (by its name): groups are measured one after the other; default: one group. */
  groupOf?: (target: string) => string;
}

export interface InterleavedResult extends HttpLoadResult {
  /** req/s of each start (the spread between starts: how far one start alone could be off). */
  reqPerSecByStart: number[];
}

interface Tally {
  requests: number;
  seconds: number;
  cpuMs: number;
  byProcessMs: Record<string, number>;
  selfCpuMs: number;
  otherPct: number[];
  p50: number[];
  p99: number[];
  statusCodes: Record<string, number>;
  byStart: number[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/**
 * Loads every target of every setup in turn. Keys of the result: `<setup>/<target>`. Every start
 * brings up all setups (one after the other, in the opposite order from the start before), warms
 * each target, then runs `rounds` slices of each, each after its lead-in (`leadInSeconds`) when one is set.
 */
export async function measureInterleaved(
  setups: Record<string, () => Promise<Setup>>,
  options: InterleavedOptions,
): Promise<Record<string, InterleavedResult>> {
  const tallies = new Map<string, Tally>();
  for (let start = 0; start < options.starts; start++) {
    options.onStart?.(start);
    const running: [string, Setup][] = [];
    try {
      // Which side starts first alternates too: in one run the mesh started first had its payments
      // service spend ~20 % more CPU per request in every start (and its content service less), and
      // the other way round when it started second — a placement, not the code.
      const order = Object.entries(setups);
      for (const [name, up] of start % 2 === 0 ? order : order.reverse()) running.push([name, await up()]);
      const allSlots = running.flatMap(([name, setup]) =>
        Object.entries(setup.targets).map(([target, http]) => ({
          key: `${name}/${target}`,
          group: options.groupOf?.(target) ?? "",
          http,
          processes: setup.processes,
        })),
      );
      const thisStart = new Map<string, { requests: number; seconds: number }>();
      for (const group of new Set(allSlots.map((slot) => slot.group))) {
        const slots = allSlots.filter((slot) => slot.group === group);
        for (const slot of slots) await fire(slot.http, options.connections, options.warmupSeconds);
        for (let round = 0; round < options.rounds; round++) {
          for (const slot of round % 2 === 0 ? slots : [...slots].reverse()) {
            if (options.leadInSeconds) await fire(slot.http, options.connections, options.leadInSeconds);
            const cpu = watchCpu(slot.processes);
            const r = await fire(slot.http, options.connections, options.sliceSeconds);
            const use = cpu();
            const t = tallies.get(slot.key) ?? {
              requests: 0,
              seconds: 0,
              cpuMs: 0,
              byProcessMs: {},
              selfCpuMs: 0,
              otherPct: [],
              p50: [],
              p99: [],
              statusCodes: {},
              byStart: [],
            };
            tallies.set(slot.key, t);
            t.requests += r.requests;
            t.seconds += r.seconds;
            for (const [name, ms] of Object.entries(use.byProcessMs ?? {})) {
              t.byProcessMs[name] = (t.byProcessMs[name] ?? 0) + ms;
              t.cpuMs += ms;
            }
            t.selfCpuMs += use.selfCpuMs ?? 0;
            if (use.otherCpuPct !== undefined) t.otherPct.push(use.otherCpuPct);
            t.p50.push(r.p50Ms);
            t.p99.push(r.p99Ms);
            for (const [code, n] of Object.entries(r.statusCodes)) t.statusCodes[code] = (t.statusCodes[code] ?? 0) + n;
            const s = thisStart.get(slot.key) ?? { requests: 0, seconds: 0 };
            thisStart.set(slot.key, { requests: s.requests + r.requests, seconds: s.seconds + r.seconds });
          }
        }
      }
      for (const [key, s] of thisStart) tallies.get(key)!.byStart.push(s.requests / s.seconds);
    } finally {
      await Promise.allSettled(running.map(([, setup]) => setup.stop()));
    }
  }
  return Object.fromEntries(
    [...tallies].map(([key, t]) => [
      key,
      {
        requests: t.requests,
        seconds: t.seconds,
        reqPerSec: t.requests / t.seconds,
        // Medians of the slices' percentiles: latencies are not what this comparison is for.
        p50Ms: median(t.p50),
        p99Ms: median(t.p99),
        non2xx: 0,
        statusCodes: t.statusCodes,
        serverCpuMsPerRequest: t.cpuMs / t.requests,
        cpuMsPerRequestBy: Object.fromEntries(
          Object.entries(t.byProcessMs).map(([name, ms]) => [name, ms / t.requests]),
        ),
        loadGeneratorCpuMsPerRequest: t.selfCpuMs / t.requests,
        otherCpuPct: t.otherPct.length ? t.otherPct.reduce((a, b) => a + b, 0) / t.otherPct.length : undefined,
        reqPerSecByStart: t.byStart,
      },
    ]),
  );
}

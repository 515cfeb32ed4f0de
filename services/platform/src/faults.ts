// Test-only fault points: places in a workflow where a test may make the process die or stall at
// the worst moment (FAULTS="orders.exit-after-charge=0.1,payments.hold-before-commit=0.2:3000": each
// point fires with its probability, a hold lasts its milliseconds). A process refuses to start with
// FAULTS set unless NODE_ENV is "test", so no deployment can carry one by mistake.
import { writeSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { optionalSetting, type Setting } from "./config.js";
import type { Logger } from "./logger.js";

export interface FaultPoint {
  probability: number;
  /** How long a hold lasts. */
  ms: number;
}

export type FaultPlan = ReadonlyMap<string, FaultPoint>;

/** The FAULTS setting of a process that has these fault points. */
export function faultsSetting(points: readonly string[]): Setting<FaultPlan> & { optional: true } {
  return optionalSetting(
    "FAULTS",
    (raw, env) => parseFaults(raw, env, points),
    `test-only fault points (${points.join(", ")}); refused unless NODE_ENV=test`,
  );
}

export function parseFaults(raw: string, env: NodeJS.ProcessEnv = {}, points: readonly string[] = []): FaultPlan {
  if (env.NODE_ENV !== "test") throw new Error("fault points are for tests only: set NODE_ENV=test or unset FAULTS");
  const plan = new Map<string, FaultPoint>();
  for (const entry of raw
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const match = /^([a-z][a-z0-9.-]*)=(0|1|0?\.\d+)(?::(\d{1,6}))?$/.exec(entry);
    if (!match) throw new Error(`expected point=probability[:ms], got "${entry}"`);
    const [, name = "", probability = "0", ms = "0"] = match;
    if (!points.includes(name)) throw new Error(`unknown fault point "${name}" (known: ${points.join(", ")})`);
    plan.set(name, { probability: Number(probability), ms: Number(ms) });
  }
  return plan;
}

export class Faults {
  constructor(
    private readonly plan: FaultPlan = new Map(),
    private readonly logger?: Logger,
    private readonly random: () => number = Math.random,
  ) {}

  /** Whether the point fires this time (logged, so a test can tell that it did). */
  fires(point: string): boolean {
    const p = this.plan.get(point);
    const fired = p !== undefined && this.random() < p.probability;
    if (fired) this.logger?.warn({ faultPoint: point }, "test fault point fired");
    return fired;
  }

  /** Dies like a crash (no drain, no cleanup) when the point fires. */
  crashIfFires(point: string): void {
    const p = this.plan.get(point);
    if (p === undefined || this.random() >= p.probability) return;
    // Written synchronously: the log's own buffered writes would die with the process.
    writeSync(
      1,
      `${JSON.stringify({ level: "warn", time: new Date().toISOString(), faultPoint: point, msg: "test fault point fired: crashing" })}\n`,
    );
    process.kill(process.pid, "SIGKILL");
  }

  /** Stalls for the point's time when it fires. */
  async holdIfFires(point: string): Promise<void> {
    if (this.fires(point)) await sleep(this.plan.get(point)!.ms);
  }
}

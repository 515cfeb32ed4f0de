// Where the CPU went while a scenario was measured (Linux /proc; unknown elsewhere): the servers'
// CPU time per request, in total and per named process (robust to other work on the machine), and
// the share of the machine used by processes outside the benchmark (the noise on a shared box).
import { readdirSync, readFileSync } from "node:fs";

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, in clock ticks. */
  ticks: number;
}

const MS_PER_TICK = 10; // USER_HZ is 100 on Linux

/** One process's resident memory (VmRSS), in MiB. */
export function rssMb(pid: number | undefined): number {
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
}

/** The CPU time (user + system) one process has used, in seconds. */
export function cpuSeconds(pid: number | undefined): number {
  // "pid (comm) state ppid … utime stime …": comm may hold spaces, so split after its last ')'.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * MS_PER_TICK) / 1000;
}

/** Every process's parent and CPU time; empty when /proc is not there. */
export function processTable(): ProcStat[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  return entries.flatMap((pid) => {
    try {
      // "pid (comm) state ppid … utime stime …": comm may hold spaces, so split after its last ')'.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return [{ pid: Number(pid), ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) }];
    } catch {
      return []; // gone meanwhile
    }
  });
}

interface Snapshot {
  machine: { busy: number; total: number };
  /** This process: the load generator. */
  self: number;
  /** All its descendants: the servers. */
  servers: number;
  byPid: Map<number, number>;
}

function snapshot(): Snapshot | undefined {
  let machine;
  try {
    const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = cpu;
    const busy = user + nice + system + irq + softirq + steal;
    machine = { busy, total: busy + idle + iowait };
  } catch {
    return undefined;
  }
  const table = processTable();
  const ours = new Set([process.pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of table) {
      if (!ours.has(p.pid) && ours.has(p.ppid)) {
        ours.add(p.pid);
        grew = true;
      }
    }
  }
  const byPid = new Map(table.filter((p) => ours.has(p.pid)).map((p) => [p.pid, p.ticks]));
  const self = byPid.get(process.pid) ?? 0;
  return { machine, self, servers: [...byPid.values()].reduce((a, b) => a + b, 0) - self, byPid };
}

export interface CpuUse {
  /** CPU time used by the benchmark's child processes (the servers), in ms. */
  serverCpuMs?: number | undefined;
  /** CPU time of each named process, in ms. */
  byProcessMs?: Record<string, number> | undefined;
  /** CPU time of this process (the load generator), in ms. */
  selfCpuMs?: number | undefined;
  /** Share of the whole machine's CPU (100 = every core busy) used by processes outside the benchmark. */
  otherCpuPct?: number | undefined;
}

/** Starts watching; the returned function tells how the CPU was used meanwhile. */
export function watchCpu(named: Record<string, number | undefined> = {}): () => CpuUse {
  const before = snapshot();
  return () => {
    const after = snapshot();
    if (!before || !after || after.machine.total === before.machine.total) return {};
    // Processes of ours that ended meanwhile drop out of the sums: the measured window holds none.
    const servers = after.servers - before.servers;
    const foreign = after.machine.busy - before.machine.busy - servers - (after.self - before.self);
    const byProcessMs = Object.fromEntries(
      Object.entries(named).flatMap(([name, pid]) =>
        pid !== undefined && before.byPid.has(pid) && after.byPid.has(pid)
          ? [[name, (after.byPid.get(pid)! - before.byPid.get(pid)!) * MS_PER_TICK]]
          : [],
      ),
    );
    return {
      serverCpuMs: servers * MS_PER_TICK,
      byProcessMs,
      selfCpuMs: (after.self - before.self) * MS_PER_TICK,
      otherCpuPct: Math.max(0, (100 * foreign) / (after.machine.total - before.machine.total)),
    };
  };
}

// CPU pinning for figures that a load generator sharing the mesh's cores would distort (issue 15):
// on a 2-core machine the generator gets core 0 and every mesh process core 1, with taskset (util-linux),
// every thread of each process (-a). Pinning is undone at the end of the measurement.
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";

export interface Pinning {
  /** The generator's cores and the mesh's, as taskset lists ("0", "1"). */
  generator: string;
  mesh: string;
  /** Gives this process all cores back. */
  undo(): void;
}

function taskset(cpus: string, pid: number): void {
  const r = spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { encoding: "utf8" });
  if (r.error || r.status !== 0)
    throw new Error(`taskset -a -p -c ${cpus} ${pid} failed: ${r.error?.message ?? r.stderr.trim()}`);
}

/**
 * Pins this process (the load generator) to the first half of the cores and the given processes
 * (the mesh) to the rest. Throws when there are fewer than 2 cores or taskset is missing: a pinned
 * figure is then not measurable, and saying so beats reporting an unpinned one under its name.
 */
export function pinGeneratorAndMesh(meshPids: (number | undefined)[]): Pinning {
  // The machine's cores, not this process's share (availableParallelism() shrinks once it is pinned).
  const cores = cpus().length;
  if (cores < 2) throw new Error(`pinning needs 2 cores, this machine has ${cores}`);
  const half = Math.floor(cores / 2);
  const generator = half === 1 ? "0" : `0-${half - 1}`;
  const mesh = half === cores - 1 ? String(half) : `${half}-${cores - 1}`;
  const all = `0-${cores - 1}`;
  taskset(generator, process.pid);
  for (const pid of meshPids) if (pid !== undefined) taskset(mesh, pid);
  return {
    generator,
    mesh,
    undo: () => taskset(all, process.pid),
  };
}

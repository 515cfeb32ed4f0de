// `npm start` stops, all of it, however it is stopped: SIGINT or SIGTERM to the pid that was started
// (npm's: what a process manager, an IDE's run button or `concurrently` signals), to the launcher's
// (dist/start.js, in the process npm started), or to the whole process group (a terminal's Ctrl-C) —
// each stops every process in order and leaves no port bound. And a launcher killed outright
// (SIGKILL), which can stop nothing, leaves no service behind: they notice it is gone and stop.
// Each case runs the real `npm start` (its build included) on ports the system picks, read from the
// line it prints when ready, with a data directory of this file's own.
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { SERVICES, type ServiceName } from "../scripts/mesh.js";

const ROOT = new URL("..", import.meta.url).pathname;
/** The services' drain (SHUTDOWN_DRAIN_MS' default) and a margin: an ordered stop of an idle mesh takes far less. */
const STOP_WITHIN_MS = 15_000;
/** "A few seconds": how long a service may outlive a launcher killed with SIGKILL. */
const ORPHAN_WITHIN_MS = 5_000;

interface ProcessInfo {
  pid: number;
  ppid: number;
  state: string;
  cmdline: string;
  /** When it started (clock ticks since boot): a pid reused by another process is told apart by it. */
  startTime: string;
}

/** A process as /proc shows it; undefined once it is gone (a zombie is gone: it only waits to be reaped). */
function processInfo(pid: number): ProcessInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) state ppid …": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const [state, ppid] = fields;
    if (state === "Z" || state === "X") return undefined;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    // Field 22 of stat, the 20th after "(comm)".
    return { pid, ppid: Number(ppid), state: state!, cmdline, startTime: fields[19]! };
  } catch {
    return undefined;
  }
}

/** Every living process below `root`. */
function descendants(root: number): ProcessInfo[] {
  const all = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => processInfo(Number(name)))
    .filter((p): p is ProcessInfo => p !== undefined);
  const found: ProcessInfo[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of all)
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
  }
  return found;
}

async function until<T>(check: () => T | undefined | false, withinMs: number, what: () => string): Promise<T> {
  for (const deadline = Date.now() + withinMs; ; await sleep(50)) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what()}`);
  }
}

/** Whether a port on the loopback interface can be bound again. */
async function isFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

const NAMES = Object.keys(SERVICES) as ServiceName[];

interface Started {
  npm: ChildProcess;
  output: string[];
  /** The process that started the services (dist/start.js runs in it). */
  launcher: number;
  services: Record<ServiceName, number>;
  /** Every port the mesh listens on: each process's own and the services' metrics ports. */
  ports: number[];
  /** Each of its processes' start time, as first seen: the same pid later is another process once it differs. */
  startTimes: Map<number, string>;
}

/** The process `pid` of this run, while it lives — never another process that was given its pid since. */
function alive(started: Started, pid: number): ProcessInfo | undefined {
  const info = processInfo(pid);
  return info && started.startTimes.get(pid) === info.startTime ? info : undefined;
}

const PORTS_ANY = Object.fromEntries(
  [
    ...NAMES.map((n) => `${n.toUpperCase()}_PORT`),
    ...NAMES.filter((n) => n !== "gateway").map((n) => `${n.toUpperCase()}_METRICS_PORT`),
  ].map((v) => [v, "0"]),
);

describe("npm start stops, however it is stopped", function () {
  this.timeout(90_000);
  let dataDir: string;
  const running: Started[] = [];

  before(() => {
    // One for every case, one after the other: migrated by the first, only opened by the rest.
    dataDir = mkdtempSync(join(tmpdir(), "switchyard-npm-start-"));
  });
  afterEach(() => {
    // A case that failed leaves nothing running for the next one (nor after the run).
    for (const started of running.splice(0))
      for (const pid of [started.npm.pid!, started.launcher, ...Object.values(started.services)])
        if (alive(started, pid)) process.kill(pid, "SIGKILL");
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  /** `npm start` in a process group of its own (as a terminal runs it), once `ready` says so. */
  async function npmStart(ready: "ready" | "launched" = "ready"): Promise<Started> {
    const npm = spawn("npm", ["start"], {
      cwd: ROOT,
      env: { ...process.env, ...PORTS_ANY, DATA_DIR: dataDir, LOG_LEVEL: "warn", npm_config_update_notifier: "false" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const output: string[] = [];
    npm.stdout.setEncoding("utf8").on("data", (d: string) => output.push(d));
    npm.stderr.setEncoding("utf8").on("data", (d: string) => output.push(d));
    const started: Started = {
      npm,
      output,
      launcher: 0,
      services: {} as Record<ServiceName, number>,
      ports: [],
      startTimes: new Map(),
    };
    const npmInfo = processInfo(npm.pid!);
    if (npmInfo) started.startTimes.set(npm.pid!, npmInfo.startTime);
    const text = () => output.join("");
    const failed = () => npm.exitCode !== null || npm.signalCode !== null;
    const servicesOf = () => {
      const below = descendants(npm.pid!);
      const services = NAMES.map((n) => below.find((p) => p.cmdline.endsWith(SERVICES[n])));
      return services.every(Boolean) ? (services as ProcessInfo[]) : undefined;
    };
    const services = await until(
      () => (failed() ? expect.fail(`npm start ended: ${text()}`) : servicesOf()),
      60_000,
      () => `every service launched: ${text()}`,
    );
    started.launcher = services[0]!.ppid;
    NAMES.forEach((n, i) => (started.services[n] = services[i]!.pid));
    for (const p of descendants(npm.pid!)) started.startTimes.set(p.pid, p.startTime);
    running.push(started);
    if (ready === "launched") return started;
    const line = await until(
      () => (failed() ? expect.fail(`npm start ended: ${text()}`) : /^Switchyard is ready at .*$/m.exec(text())?.[0]),
      60_000,
      () => `the ready line: ${text()}`,
    );
    const m =
      /http:\/\/127\.0\.0\.1:(\d+)\/docs .*identity :(\d+), payments :(\d+), orders :(\d+), content :(\d+), webhooks :(\d+); metrics at \S+ and :(\d+), :(\d+), :(\d+), :(\d+), :(\d+)\/metrics/.exec(
        line,
      );
    expect(m, line).to.not.equal(null);
    started.ports = m!.slice(1).map(Number);
    expect(started.ports.every((p) => p > 0)).to.equal(true);
    return started;
  }

  /** Every process of the run gone within `withinMs`, and every port it had free again. */
  async function expectAllGone(started: Started, withinMs: number): Promise<void> {
    const pids = () => ({ npm: started.npm.pid!, launcher: started.launcher, ...started.services });
    await until(
      () => Object.values(pids()).every((pid) => alive(started, pid) === undefined),
      withinMs,
      () =>
        `still running: ${Object.entries(pids())
          .filter(([, pid]) => alive(started, pid))
          .map(([name]) => name)
          .join(", ")}\n${started.output.join("").slice(-2_000)}`,
    );
    for (const port of started.ports) expect(await isFree(port), `port ${port} is free again`).to.equal(true);
  }

  const targets = {
    "npm's pid": (s: Started) => s.npm.pid!,
    "the launcher's pid": (s: Started) => s.launcher,
    "the process group": (s: Started) => -s.npm.pid!,
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    for (const [target, pidOf] of Object.entries(targets)) {
      it(`${signal} to ${target} stops every process in order and frees every port`, async () => {
        const started = await npmStart();
        process.kill(pidOf(started), signal);
        await expectAllGone(started, STOP_WITHIN_MS);
        const said = started.output.join("");
        expect(said, "the launcher stopped the mesh in order").to.match(/^Switchyard: stopped\.$/m);
        expect(said, "once, not at once").not.to.include("stopped at once");
      });
    }
  }

  it("SIGTERM to npm's pid while the mesh starts stops what has started", async () => {
    const started = await npmStart("launched");
    process.kill(started.npm.pid!, "SIGTERM");
    await expectAllGone(started, STOP_WITHIN_MS);
  });

  it("SIGKILL to the launcher: every service notices within a few seconds and stops", async () => {
    const started = await npmStart();
    process.kill(started.launcher, "SIGKILL");
    await expectAllGone(started, ORPHAN_WITHIN_MS);
  });
});

// Child processes of the benchmark: every server runs in its own process, announces its port on
// stdout, and is killed when the benchmark ends — normally, on an error, or on a signal.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { processTable } from "./machine.js";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
const READY_LINE = /^LISTENING (\d+)$/m;
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

const live = new Set<ChildProcess>();

/**
 * Kills every child still running (synchronous: safe in an `exit` handler): the tracked ones, and
 * any other direct child (a mesh process whose start was interrupted before it could be tracked).
 */
export function killAll(): void {
  for (const child of live) child.kill("SIGKILL");
  for (const { pid } of processTable().filter((p) => p.ppid === process.pid)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
process.on("exit", killAll);

/** Remembers a child so that `killAll` reaches it. */
export function track(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  live.add(child);
  child.once("exit", () => live.delete(child));
}

/** SIGTERM, then SIGKILL if it has not exited in time. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const killer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(killer);
}

export interface ServerProcess {
  readonly pid: number | undefined;
  readonly port: number;
  readonly address: string;
  stop(): Promise<void>;
}

/** Starts `node --import tsx bench/servers/<file>` and waits for its `LISTENING <port>` line. */
export async function startServer(
  file: string,
  env: NodeJS.ProcessEnv = {},
  nodeFlags: string[] = [],
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeFlags, "--import", "tsx", `bench/servers/${file}`], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    // stdin stays open: the child exits when it closes, i.e. when this process dies.
    stdio: ["pipe", "pipe", "pipe"],
  });
  track(child);
  let output = "";
  const keep = (d: string) => (output = (output + d).slice(-4_000));
  child.stdout.setEncoding("utf8").on("data", keep);
  child.stderr.setEncoding("utf8").on("data", keep);

  const port = await new Promise<number>((resolve, reject) => {
    const settle = (err: Error | undefined, port = 0) => {
      clearTimeout(timer);
      child.off("exit", onExit).off("error", onError);
      child.stdout.off("data", onData);
      if (!err) return resolve(port);
      child.kill("SIGKILL");
      reject(new Error(`${file}: ${err.message}\n${output}`));
    };
    const onExit = (code: number | null, signal: string | null) =>
      settle(new Error(`exited before listening (code ${code}, signal ${signal})`));
    const onError = (err: Error) => settle(err);
    const onData = () => {
      const match = READY_LINE.exec(output);
      if (match) settle(undefined, Number(match[1]));
    };
    const timer = setTimeout(
      () => settle(new Error(`no LISTENING line within ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
    child.on("exit", onExit).on("error", onError);
    child.stdout.on("data", onData);
  });
  return { pid: child.pid, port, address: `127.0.0.1:${port}`, stop: () => stopChild(child) };
}

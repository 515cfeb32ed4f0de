// A Redis server of a test's own, to stop and start again on the same port (the machine's
// redis-server; REDIS_SERVER names another binary). It keeps nothing on disk.
import { spawn, type ChildProcess, execFileSync } from "node:child_process";
import { createConnection } from "node:net";
import { freePort } from "../../services/platform/test/support/free-port.js";
import { setTimeout as sleep } from "node:timers/promises";

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

function binary(): string | undefined {
  const named = process.env.REDIS_SERVER ?? "redis-server";
  try {
    execFileSync(named, ["--version"], { stdio: "ignore" });
    return named;
  } catch {
    return undefined;
  }
}

const answers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => socket.end(() => resolve(true)));
    socket.once("error", () => resolve(false));
  });

/** Starts a server of the test's own; `{ skip }` with the reason when the machine has no redis-server. */
export async function startRedisServer(): Promise<RedisServer | { skip: string }> {
  const bin = binary();
  if (!bin) return { skip: "no redis-server on this machine (REDIS_SERVER names another)" };
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    for (const until = Date.now() + 10_000; !(await answers(port)); await sleep(25))
      if (Date.now() > until || child.exitCode !== null) throw new Error(`redis-server did not start on ${port}`);
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    async stop() {
      const running = child;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once("exit", resolve));
      running.kill("SIGKILL");
      await exited;
    },
  };
}

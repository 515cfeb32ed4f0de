// The life of a benchmark server process: start, print `LISTENING <port>` for the parent, and
// stop on SIGTERM / SIGINT or as soon as the parent goes away (its end of stdin closes).
export interface Started {
  port: number;
  stop(): Promise<void>;
}

export function serve(name: string, start: () => Promise<Started>): void {
  start().then(
    ({ port, stop }) => {
      let stopping = false;
      const exit = () => {
        if (stopping) return;
        stopping = true;
        setTimeout(() => process.exit(0), 2_000).unref();
        // Exits whether stop succeeds or fails: the exit in finally comes before a rejection could surface.
        void stop().finally(() => process.exit(0));
      };
      process.on("SIGTERM", exit).on("SIGINT", exit);
      process.stdin.on("end", exit).on("close", exit).resume();
      process.stdout.write(`LISTENING ${port}\n`);
    },
    (err: unknown) => {
      process.stderr.write(`${name}: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
}

/** Closes a node:http / node:http2 server, cutting keep-alive connections. */
export function closeServer(server: {
  close(cb: () => void): unknown;
  closeAllConnections?: () => void;
}): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections?.();
  });
}

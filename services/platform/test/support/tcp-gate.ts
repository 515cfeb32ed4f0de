// A TCP gate in front of a real server, for tests that take a peer away and give it back without
// restarting it: open, it pipes every connection through; shut, it refuses new connections and cuts
// the ones it carries (a peer gone away, as its clients see it); stalled, it holds every byte (a peer
// that hangs).
import { connect, createServer, type Server, type Socket } from "node:net";

export class TcpGate {
  readonly #sockets = new Set<Socket>();
  #isOpen = true;
  #stalled = false;

  private constructor(
    private readonly server: Server,
    readonly address: string,
  ) {}

  /** A gate on a free port of 127.0.0.1, open, in front of `target` (host:port). */
  static async before(target: string): Promise<TcpGate> {
    const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
    let gate: TcpGate | undefined;
    const server = createServer((client) => {
      if (gate === undefined || !gate.#isOpen) {
        client.destroy();
        return;
      }
      const upstream = connect(port, host);
      const sockets = gate.#sockets;
      for (const s of [client, upstream]) {
        if (gate.#stalled) s.pause();
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    gate = new TcpGate(server, `127.0.0.1:${(server.address() as { port: number }).port}`);
    return gate;
  }

  /** Refuses new connections and cuts the open ones. */
  shut(): void {
    this.#isOpen = false;
    for (const s of this.#sockets) s.destroy();
  }

  /** Holds every byte in both directions until reopened: the connections stay, nothing arrives. */
  stall(): void {
    for (const s of this.#sockets) s.pause();
    this.#stalled = true;
  }

  reopen(): void {
    this.#isOpen = true;
    this.#stalled = false;
    for (const s of this.#sockets) s.resume();
  }

  async close(): Promise<void> {
    this.shut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

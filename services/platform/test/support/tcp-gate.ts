// A TCP gate in front of a real server, for tests that take a peer away and give it back without
// restarting it: open, it pipes every connection through; shut, it stops listening — new connections
// are refused, as a stopped peer's are — and cuts the ones it carries (a peer gone away, as its clients
// see it); stalled, it holds every byte (a peer that hangs).
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
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
      // After pipe(), which resumes its source: a connection made while stalled holds its bytes too.
      if (gate.#stalled) for (const s of [client, upstream]) s.pause();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    gate = new TcpGate(server, `127.0.0.1:${(server.address() as { port: number }).port}`);
    return gate;
  }

  /** Refuses new connections (it stops listening) and cuts the open ones. */
  shut(): void {
    if (this.#isOpen && this.server.listening) this.server.close();
    this.#isOpen = false;
    for (const s of this.#sockets) s.destroy();
  }

  /** Holds every byte in both directions until reopened: the connections stay, nothing arrives. */
  stall(): void {
    for (const s of this.#sockets) s.pause();
    this.#stalled = true;
  }

  reopen(): void {
    // Listening again on the same port (an ephemeral one nobody else is handed in the meantime).
    if (!this.#isOpen && !this.server.listening) this.server.listen(Number(this.address.split(":")[1]), "127.0.0.1");
    this.#isOpen = true;
    this.#stalled = false;
    for (const s of this.#sockets) s.resume();
  }

  async close(): Promise<void> {
    this.shut();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// An open-loop HTTP/1.1 load generator: requests are sent at a steady rate whether or not earlier
// ones have been answered (as independent clients arrive), over a pool of keep-alive sockets.
// A closed loop cannot overload a server — each client waits for its answer — and autocannon's
// rate option sends each connection's whole second of requests at once; this spreads them evenly.
// Latency counts from the moment a request was due, so waiting for a free socket counts too (no
// coordinated omission). Answers are read just far enough to know status, headers and length.
import { connect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { Latencies } from "./latency.js";

export interface OpenLoopTarget {
  url: string;
  headers: Record<string, string>;
}

export interface OpenLoopOptions {
  /** Requests per second to send. */
  rate: number;
  seconds: number;
  /** Keep-alive sockets to spread them over. */
  sockets: number;
}

export interface StatusStats {
  count: number;
  perSec: number;
  p50Ms: number;
  p99Ms: number;
}

export interface OpenLoopResult {
  rate: number;
  seconds: number;
  sent: number;
  byStatus: Record<string, StatusStats>;
  /** 503 answers that carried Retry-After. */
  withRetryAfter503: number;
  /** Requests not answered within 2 s of the end. */
  unanswered: number;
  /**
   * How late the generator's own tick was (ms from a request falling due to its tick sending it, or
   * queueing it for a busy socket; the 1 ms tick alone makes up to 1): latency counts from the due
   * time, so a stalled generator would show up as the server's latency.
   */
  sendLateness: { p99Ms: number; maxMs: number };
}

const HEADER_END = Buffer.from("\r\n\r\n");

/** One keep-alive socket: one request at a time, the next taken from the shared backlog. */
class Connection {
  private buffer: Buffer = Buffer.alloc(0);
  private dueAt: number | undefined;
  /** Body bytes still to come, or -1 while reading the head. */
  private need = -1;
  private status = 0;
  private retryAfter = false;

  constructor(
    private readonly socket: Socket,
    private readonly request: Buffer,
    private readonly next: () => number | undefined,
    private readonly answered: (status: number, dueAt: number, retryAfter: boolean) => void,
    private readonly idle: (connection: Connection) => void,
    gone: (connection: Connection) => void,
  ) {
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    // A socket the server closes leaves its request unanswered (counted), not the run crashed.
    socket.on("error", () => {});
    socket.on("close", () => gone(this));
  }

  send(dueAt: number): void {
    this.dueAt = dueAt;
    this.socket.write(this.request);
  }

  destroy(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.need < 0) {
        const end = this.buffer.indexOf(HEADER_END);
        if (end < 0) return;
        const head = this.buffer.subarray(0, end).toString("latin1");
        this.status = Number(head.slice(9, 12));
        this.retryAfter = /\r\nretry-after:/i.test(head);
        this.need = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        this.buffer = this.buffer.subarray(end + HEADER_END.length);
      }
      if (this.buffer.length < this.need) return;
      this.buffer = this.buffer.subarray(this.need);
      this.need = -1;
      if (this.dueAt !== undefined) this.answered(this.status, this.dueAt, this.retryAfter);
      const due = this.next();
      if (due === undefined) {
        this.dueAt = undefined;
        this.idle(this);
      } else this.send(due);
    }
  }
}

export async function measureOpenLoop(target: OpenLoopTarget, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const url = new URL(target.url);
  const head = [
    `GET ${url.pathname}${url.search} HTTP/1.1`,
    `host: ${url.host}`,
    ...Object.entries(target.headers).map(([k, v]) => `${k}: ${v}`),
  ];
  const request = Buffer.from(`${head.join("\r\n")}\r\n\r\n`);
  const latencies = new Map<number, Latencies>();
  const lateness = new Latencies();
  let withRetryAfter503 = 0;
  let sent = 0;
  let answered = 0;
  const idle: Connection[] = [];
  const backlog: number[] = [];
  let backlogStart = 0;

  const onAnswer = (status: number, dueAt: number, retryAfter: boolean) => {
    let l = latencies.get(status);
    if (!l) latencies.set(status, (l = new Latencies()));
    l.record(performance.now() - dueAt);
    if (status === 503 && retryAfter) withRetryAfter503++;
    answered++;
  };
  const nextDue = () => (backlogStart < backlog.length ? backlog[backlogStart++] : undefined);
  const connections = await Promise.all(
    Array.from(
      { length: options.sockets },
      () =>
        new Promise<Connection>((resolve, reject) => {
          const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true });
          socket.once("error", reject);
          socket.once("connect", () =>
            resolve(
              new Connection(
                socket,
                request,
                nextDue,
                onAnswer,
                (c) => idle.push(c),
                (c) => idle.includes(c) && idle.splice(idle.indexOf(c), 1),
              ),
            ),
          );
        }),
    ),
  );
  idle.push(...connections);

  const started = performance.now();
  const until = started + options.seconds * 1_000;
  const interval = 1_000 / options.rate;
  await new Promise<void>((resolve) => {
    // Due times are spread evenly; every millisecond the requests that fell due go out.
    let due = started;
    const tick = setInterval(() => {
      const now = performance.now();
      for (const stop = Math.min(now, until); due <= stop; due += interval) {
        sent++;
        // The longest idle socket first: every socket stays in use, so none idles into the
        // server's keep-alive timeout and closes under a request.
        const connection = idle.shift();
        lateness.record(now - due);
        if (connection) connection.send(due);
        else backlog.push(due);
      }
      if (now >= until) {
        clearInterval(tick);
        resolve();
      }
    }, 1);
  });
  const grace = performance.now() + 2_000;
  while (answered < sent && performance.now() < grace) await new Promise((r) => setTimeout(r, 10));
  for (const c of connections) c.destroy();
  const byStatus = Object.fromEntries(
    [...latencies].map(([status, l]) => [
      String(status),
      { count: l.count, perSec: l.count / options.seconds, p50Ms: l.percentileMs(50), p99Ms: l.percentileMs(99) },
    ]),
  );
  return {
    rate: options.rate,
    seconds: options.seconds,
    sent,
    byStatus,
    withRetryAfter503,
    unanswered: sent - answered,
    sendLateness: { p99Ms: lateness.percentileMs(99), maxMs: lateness.maxMs },
  };
}

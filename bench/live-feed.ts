// The live feed at scale (issue 15): N subscribers of one tenant hold GET /v1/posts as Server-Sent
// Events on one gateway while posts are published; measured from outside — how many subscribers were
// refused, whether every post reached every subscriber, the latency from sending the POST to each
// delivery (p50/p99/max), and the resident memory of the gateway and content per idle subscriber.
// The client holding the subscribers runs on one core, every mesh process on the other (taskset).
// Run with measureLiveFeed() from bench/run.ts, or directly: `tsx bench/live-feed.ts [N …]`.
import { connect, type Socket } from "node:net";
import { pathToFileURL } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startMeshFixture, type MeshFixture } from "./mesh-fixture.js";
import { pinGeneratorAndMesh, type Pinning } from "./pinning.js";
import { cpuSeconds, rssMb } from "./machine.js";
import { Latencies } from "./load/latency.js";

/** Target: 10,000 subscribers held on one gateway, every post delivered to all, p99 ≤ 200 ms (issue 46). */
export const LIVE_FEED_TARGET = { subscribers: 10_000, p99Ms: 200 } as const;

export interface LiveFeedResult {
  subscribers: number;
  /** Subscribers the gateway answered with something else than 200 (or whose connection failed). */
  refused: number;
  posts: number;
  /** Deliveries received ÷ (posts × subscribers held). */
  deliveredRatio: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Seconds to open every subscriber (at most OPEN_CONCURRENCY opening at once). */
  openSeconds: number;
  rssMb: { gateway: { before: number; held: number }; content: { before: number; held: number } };
  /** CPU microseconds per delivery (one post to one subscriber) while posting: gateway, content, and this load generator. */
  cpuUsPerDelivery: { gateway: number; content: number; client: number };
  /** (RSS with the subscribers held − before) ÷ subscribers, gateway and content together, in KiB. */
  kibPerSubscriber: number;
  pass: boolean;
}

const OPEN_CONCURRENCY = 200;
const POSTS = 20;
const POST_INTERVAL_MS = 250;
const SETTLE_MS = 3_000;
const TITLE = Buffer.from('"title":"feed-bench-');
const QUOTE = 0x22;
const EMPTY = Buffer.alloc(0);
const EVENT_END = Buffer.from("\n\n");
/** What every subscriber's socket reads into: each read is taken before the next one reuses it. */
const READ_BUFFER = Buffer.alloc(64 * 1024);

/**
 * Holds N event streams; records when each post (by its title's number) arrives at each. Each stream
 * is a plain TCP connection speaking HTTP/1.1 by hand: the feed's body is the raw event stream (the
 * gateway answers `connection: close`, no chunking), so reading it needs no HTTP parser, stream or
 * text decoding per delivery. This client holds all N on one core, and its own cost per delivery
 * delays when a delivery is seen: the cheaper it is, the more the latency is the gateway's. So every
 * socket reads into one buffer (`onread`: no readable stream, no 'data' event, no Buffer allocated
 * per read), and what a read leaves unfinished is copied out of it.
 */
class Subscribers {
  private readonly sockets: Socket[] = [];
  /** arrivals[post] = arrival times (ms, performance.now) of that post at every subscriber that got it. */
  readonly arrivals: number[][] = Array.from({ length: POSTS }, () => []);
  refused = 0;
  readonly refusals = new Map<number, number>();
  ended = 0;
  endings: string[] = [];

  constructor(
    private readonly url: URL,
    private readonly token: string,
  ) {}

  /** Records the posts ("feed-bench-<n>" titles) in a stream's complete events as arrived at `now`. */
  private record(events: Buffer, now: number): void {
    for (let at = events.indexOf(TITLE); at !== -1; at = events.indexOf(TITLE, at)) {
      const end = events.indexOf(QUOTE, at + TITLE.length);
      if (end === -1) return;
      this.arrivals[Number(events.toString("latin1", at + TITLE.length, end))]?.push(now);
      at = end;
    }
  }

  private openOne(): Promise<void> {
    return new Promise((resolve) => {
      const socket = connect({
        host: this.url.hostname,
        port: Number(this.url.port),
        onread: {
          buffer: READ_BUFFER,
          callback: (n) => {
            read(READ_BUFFER.subarray(0, n));
            return true; // keep reading
          },
        },
      });
      /** The response head while it is incomplete; undefined once the stream is held or refused. */
      let head: Buffer | undefined = Buffer.alloc(0);
      let held = false;
      /** The start of an event whose end has not arrived yet (usually nothing: the gateway writes whole events). */
      let partial: Buffer = Buffer.alloc(0);
      /** The stream's last chunk (copied: the read buffer is shared), whose tail says how it ended (LIVE_FEED_DEBUG). */
      let last: Buffer | undefined;
      const debug = Boolean(process.env.LIVE_FEED_DEBUG);
      const refuse = (status: number) => {
        if (head === undefined) return;
        head = undefined;
        this.refused++;
        this.refusals.set(status, (this.refusals.get(status) ?? 0) + 1);
        socket.destroy();
        resolve();
      };
      /** An event counts as arrived when its last byte has: complete events are scanned, the rest waits. */
      const take = (bytes: Buffer, now: number) => {
        const data = partial.length > 0 ? Buffer.concat([partial, bytes]) : bytes;
        const end = data.lastIndexOf(EVENT_END);
        const complete = end === -1 ? 0 : end + EVENT_END.length;
        if (complete > 0) this.record(data.subarray(0, complete), now);
        // Kept past this read: a copy, since the read buffer is reused by the next read of any socket.
        partial = complete === data.length ? EMPTY : Buffer.from(data.subarray(complete));
      };
      socket.on("connect", () => {
        socket.write(
          `GET /v1/posts HTTP/1.1\r\nhost: ${this.url.host}\r\nauthorization: Bearer ${this.token}\r\naccept: text/event-stream\r\n\r\n`,
        );
      });
      /** One read's bytes, valid only until this returns. */
      const read = (chunk: Buffer) => {
        const now = performance.now();
        if (debug) last = Buffer.from(chunk);
        if (held) return take(chunk, now);
        if (!head) return;
        head = Buffer.concat([head, chunk]);
        const bodyAt = head.indexOf("\r\n\r\n");
        if (bodyAt === -1) return;
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.toString("latin1", 0, 13))?.[1] ?? 0);
        if (status !== 200) return refuse(status);
        const body = head.subarray(bodyAt + 4);
        head = undefined;
        held = true;
        this.sockets.push(socket);
        resolve();
        take(body, now);
      };
      // A connection that fails or closes before its answer is a refusal (counted once); after, an ending.
      socket.on("error", () => refuse(0));
      socket.on("close", () => {
        if (!held) return refuse(0);
        this.ended++;
        if (this.endings.length < 3) this.endings.push(last?.toString("utf8", Math.max(0, last.length - 300)) ?? "");
      });
    });
  }

  async open(n: number): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < n) {
        next++;
        await this.openOne();
      }
    };
    await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, n) }, worker));
  }

  get held(): number {
    return this.sockets.length;
  }

  close(): void {
    for (const socket of this.sockets) socket.destroy();
  }
}

export async function measureLiveFeed(subscribers: number): Promise<LiveFeedResult> {
  let mesh: MeshFixture | undefined;
  let subs: Subscribers | undefined;
  let pinning: Pinning | undefined;
  try {
    // Embedded storage; the per-caller stream cap raised for the one benchmark user (a setting).
    mesh = await startMeshFixture({ limit: "none", env: { GATEWAY_MAX_STREAMS_PER_CALLER: String(subscribers) } });
    const { gateway, content } = mesh.pids;
    // The subscribers' client parses every delivery (about as much CPU as the gateway spends sending
    // it): it gets a core of its own, the mesh the other, so the figure is the gateway's, not a share.
    pinning = pinGeneratorAndMesh(Object.values(mesh.pids));
    await sleep(1_000);
    const before = { gateway: rssMb(gateway), content: rssMb(content) };
    subs = new Subscribers(new URL(mesh.gatewayUrl), mesh.token);
    const opening = performance.now();
    await subs.open(subscribers);
    const openSeconds = (performance.now() - opening) / 1000;
    await sleep(SETTLE_MS);
    const held = { gateway: rssMb(gateway), content: rssMb(content) };

    const cpuBefore = { gateway: cpuSeconds(gateway), content: cpuSeconds(content), client: process.cpuUsage() };
    const sentAt: number[] = [];
    for (let n = 0; n < POSTS; n++) {
      sentAt[n] = performance.now();
      const res = await fetch(`${mesh.gatewayUrl}/v1/posts`, {
        method: "POST",
        headers: { authorization: `Bearer ${mesh.token}`, "content-type": "application/json" },
        body: JSON.stringify({ title: `feed-bench-${n}`, body: "a post to every subscriber" }),
      });
      if (res.status !== 201) throw new Error(`POST /v1/posts → ${res.status}: ${await res.text()}`);
      await sleep(POST_INTERVAL_MS);
    }
    // Everything sent: wait until every delivery arrived, or a bounded while.
    const expected = POSTS * subs.held;
    const received = () => subs!.arrivals.reduce((n, a) => n + a.length, 0);
    const deadline = performance.now() + 15_000;
    while (received() < expected && performance.now() < deadline) await sleep(100);

    if (process.env.LIVE_FEED_DEBUG)
      console.error({
        refusals: [...subs.refusals],
        ended: subs.ended,
        endings: subs.endings,
        logs: mesh.logs.join("").slice(-3000),
      });
    const clientCpu = process.cpuUsage(cpuBefore.client);
    const deliveries = Math.max(1, received());
    const cpuUsPerDelivery = {
      gateway: ((cpuSeconds(gateway) - cpuBefore.gateway) * 1e6) / deliveries,
      content: ((cpuSeconds(content) - cpuBefore.content) * 1e6) / deliveries,
      client: (clientCpu.user + clientCpu.system) / deliveries,
    };
    const latencies = new Latencies();
    subs.arrivals.forEach((times, n) => times.forEach((t) => latencies.record(t - sentAt[n]!)));
    const result: LiveFeedResult = {
      subscribers,
      refused: subs.refused,
      posts: POSTS,
      deliveredRatio: expected === 0 ? 0 : received() / expected,
      p50Ms: latencies.percentileMs(50),
      p99Ms: latencies.percentileMs(99),
      maxMs: latencies.maxMs,
      openSeconds,
      rssMb: {
        gateway: { before: before.gateway, held: held.gateway },
        content: { before: before.content, held: held.content },
      },
      cpuUsPerDelivery,
      kibPerSubscriber:
        ((held.gateway - before.gateway + held.content - before.content) * 1024) / Math.max(1, subs.held),
      pass: false,
    };
    result.pass = result.refused === 0 && result.deliveredRatio === 1 && result.p99Ms <= LIVE_FEED_TARGET.p99Ms;
    return result;
  } finally {
    subs?.close();
    await mesh?.stop();
    pinning?.undo();
  }
}

export function formatLiveFeed(r: LiveFeedResult): string {
  return [
    `  ${r.subscribers.toLocaleString("en")} subscribers, client and mesh on separate cores (opened in ${r.openSeconds.toFixed(1)} s, ${r.refused} refused), ${r.posts} posts ${POST_INTERVAL_MS} ms apart: delivered ${(100 * r.deliveredRatio).toFixed(2)} %, POST → delivery p50 ${r.p50Ms.toFixed(0)} ms, p99 ${r.p99Ms.toFixed(0)} ms, max ${r.maxMs.toFixed(0)} ms`,
    `    CPU per delivery: gateway ${r.cpuUsPerDelivery.gateway.toFixed(1)} µs, content ${r.cpuUsPerDelivery.content.toFixed(1)} µs, load generator ${r.cpuUsPerDelivery.client.toFixed(1)} µs`,
    `    RSS gateway ${r.rssMb.gateway.before.toFixed(0)} → ${r.rssMb.gateway.held.toFixed(0)} MiB, content ${r.rssMb.content.before.toFixed(0)} → ${r.rssMb.content.held.toFixed(0)} MiB: ${r.kibPerSubscriber.toFixed(1)} KiB per idle subscriber`,
    ...(r.subscribers >= LIVE_FEED_TARGET.subscribers
      ? [
          `    target: every post to all, none refused, p99 ≤ ${LIVE_FEED_TARGET.p99Ms} ms → ${r.pass ? "PASS" : "MISS"}`,
        ]
      : []),
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const sizes = process.argv.slice(2).map(Number);
  for (const n of sizes.length > 0 ? sizes : [1_000, LIVE_FEED_TARGET.subscribers])
    console.log(formatLiveFeed(await measureLiveFeed(n)));
  process.exit(0);
}

// Attacks from outside, through the real mesh: no transport detail reaches a client, on /v1, on /rpc
// or on a stream. A page of posts larger than the channel's receive limit (4 MiB) is answered with
// fewer items and a cursor — it was 429 with grpc-js's "Received message larger than max"; calls
// whose deadline (Connect-Timeout-Ms, grpc-timeout, X-Request-Timeout-Ms) passes within 1–5 ms
// either succeed or say so in the gateway's own words — they said "Deadline exceeded after 0.000s,
// remote_addr=127.0.0.1:50054" on /rpc.
import { expect } from "chai";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ContentService, ListPostsRequestSchema } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { ALICE, CAROL, startE2eMesh, unique, type E2eMesh } from "../../support/http.js";

/** What a client must never see: grpc-js's text, an address inside the mesh. */
const TRANSPORT_DETAIL = /remote_addr|127\.0\.0\.1|Deadline exceeded after|larger than max|the operation timed out/i;
/** The gateway's words for an upstream past its deadline (gateway/src/runtime/errors.ts). */
const CONTENT_TOO_SLOW = "the content service did not answer in time; the operation may have completed";

const POSTS = 100;
/** é (2 bytes), € (3), 😀 (4 bytes, 2 UTF-16 units): 9 bytes of UTF-8 in 4 characters. */
const WIDE = "é€😀";

describe("e2e attacks: no transport detail reaches a client (/v1, /rpc, streams)", function () {
  this.timeout(30_000);
  let env: E2eMesh;
  let rpc: string;
  /** A tenant's feed of ~100 posts of 45–58 KB of UTF-8 each: 5 MB, more than one message may hold. */
  let carol: string;
  let alice: string;
  const made = new Map<string, number>();

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("attacks-transport", { envFor: { gateway: { GATEWAY_MAX_STREAMS_PER_CALLER: "100" } } });
    rpc = `${env.mesh.gatewayUrl}/rpc`;
    [carol, alice] = await Promise.all([env.api.login(CAROL), env.api.login(ALICE)]);
    const run = unique();
    // 45,000 to 58,365 bytes each (within the 64 KiB body limit): 18,000 to 23,940 characters.
    for (let batch = 0; batch < POSTS; batch += 10) {
      await Promise.all(
        Array.from({ length: 10 }, async (_, j) => {
          const i = batch + j;
          const body = WIDE.repeat(5_000 + i * 15);
          const res = await env.api.post("/v1/posts", { token: carol, json: { title: `big ${run} ${i}`, body } });
          expect(res.status, res.text.slice(0, 200)).to.equal(201);
          made.set(res.json.id as string, Buffer.byteLength(body));
        }),
      );
    }
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  describe("a page of posts larger than a gRPC message", () => {
    it("GET /v1/posts?limit=100 answers 200 with fewer items and a next_cursor; following it gives every post exactly once", async () => {
      const total = [...made.values()].reduce((a, b) => a + b, 0);
      expect(total, "the feed's posts together").to.be.greaterThan(4 * 1024 * 1024);
      const first = await env.api.get("/v1/posts?limit=100", { token: carol });
      expect(first.status, first.text.slice(0, 300)).to.equal(200);
      expect(first.json.items.length, "a page bounded in bytes").to.be.within(1, POSTS - 1);
      expect(first.json.next_cursor).to.be.a("string");
      expect(first.headers.get("link")).to.match(/rel="next"/);
      const ids = (await env.api.listAll("/v1/posts", carol)).map((p: { id: string }) => p.id);
      expect(new Set(ids).size, "no post twice").to.equal(ids.length);
      expect([...ids].sort()).to.deep.equal([...made.keys()].sort());
    });

    const transports: [string, () => Transport][] = [
      ["Connect (JSON)", () => createConnectTransport({ baseUrl: rpc, httpVersion: "1.1" })],
      ["Connect (binary)", () => createConnectTransport({ baseUrl: rpc, httpVersion: "1.1", useBinaryFormat: true })],
      ["gRPC-Web", () => createGrpcWebTransport({ baseUrl: rpc, httpVersion: "1.1" })],
    ];
    for (const [name, transport] of transports) {
      it(`ListPosts through /rpc (${name}) pages the same way: fewer than 100, a next_page_token, every post once`, async () => {
        const content = createClient(ContentService, transport());
        const headers = { authorization: `Bearer ${carol}` };
        const ids: string[] = [];
        let pageToken = "";
        for (let pages = 0; pages < 100; pages++) {
          const page = await content.listPosts({ pageSize: 100, pageToken }, { headers });
          if (pages === 0) expect(page.posts.length).to.be.within(1, POSTS - 1);
          ids.push(...page.posts.map((p) => p.id));
          pageToken = page.nextPageToken;
          if (pageToken === "") break;
        }
        expect(pageToken, "paging ended").to.equal("");
        expect([...ids].sort()).to.deep.equal([...made.keys()].sort());
      });
    }
  });

  /** Everything a client got: status line, every header, the body as text. */
  async function answer(res: Response): Promise<{ status: number; headers: string; body: Buffer; text: string }> {
    const body = Buffer.from(await res.arrayBuffer());
    return {
      status: res.status,
      headers: [...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n"),
      body,
      text: body.toString("utf8"),
    };
  }

  /** One enveloped message (Connect streaming, gRPC-Web): flags 0, its length, its bytes. */
  function envelope(message: Uint8Array): Buffer {
    const head = Buffer.alloc(5);
    head.writeUInt32BE(message.length, 1);
    return Buffer.concat([head, message]);
  }

  /** The frames of an enveloped body: [flags, payload][]. */
  function frames(body: Buffer): [number, Buffer][] {
    const out: [number, Buffer][] = [];
    for (let at = 0; at + 5 <= body.length;) {
      const length = body.readUInt32BE(at + 1);
      out.push([body[at]!, body.subarray(at + 5, at + 5 + length)]);
      at += 5 + length;
    }
    return out;
  }

  describe("deadlines that pass within 1–5 ms", () => {
    const TRIES = 6;
    const DEADLINES = [1, 2, 3, 4, 5];
    /** Reads that take the content service more than a few ms: a page of the large feed. */
    const LIST_POSTS = { pageSize: 20 };

    it("Connect unary (ListPosts, ListCatalogItems): success, or deadline_exceeded in the gateway's words; no transport detail anywhere", async () => {
      let deadlines = 0;
      for (let t = 0; t < TRIES; t++) {
        for (const ms of DEADLINES) {
          for (const [method, message, token] of [
            ["ListPosts", LIST_POSTS, carol],
            ["ListCatalogItems", { pageSize: 100 }, alice],
          ] as const) {
            const res = await answer(
              await fetch(`${rpc}/switchyard.content.v1.ContentService/${method}`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "connect-protocol-version": "1",
                  "connect-timeout-ms": String(ms),
                  authorization: `Bearer ${token}`,
                },
                body: JSON.stringify(message),
              }),
            );
            expect(`${res.headers}\n${res.text}`, `${method} in ${ms} ms`).to.not.match(TRANSPORT_DETAIL);
            if (res.status === 200) continue;
            const error = JSON.parse(res.text) as { code: string; message: string };
            expect([res.status, error.code, error.message], `${method} in ${ms} ms`).to.deep.equal([
              504,
              "deadline_exceeded",
              CONTENT_TOO_SLOW,
            ]);
            deadlines++;
          }
        }
      }
      expect(deadlines, "calls that met their deadline").to.be.greaterThan(0);
    });

    it("gRPC-Web with grpc-timeout (ListPosts): grpc-status 0, or 4 in the gateway's words; no transport detail in headers or trailers", async () => {
      const message = envelope(toBinary(ListPostsRequestSchema, create(ListPostsRequestSchema, LIST_POSTS)));
      let deadlines = 0;
      for (let t = 0; t < TRIES; t++) {
        for (const ms of DEADLINES) {
          const res = await answer(
            await fetch(`${rpc}/switchyard.content.v1.ContentService/ListPosts`, {
              method: "POST",
              headers: {
                "content-type": "application/grpc-web+proto",
                "x-grpc-web": "1",
                "grpc-timeout": `${ms}m`,
                authorization: `Bearer ${carol}`,
              },
              body: message,
            }),
          );
          expect(res.status).to.equal(200);
          // The trailers: in the headers (trailers-only), or in the body's last frame (flag 0x80).
          const trailer =
            frames(res.body)
              .find(([flags]) => (flags & 0x80) !== 0)?.[1]
              .toString("utf8") ?? "";
          const said = decodeURIComponent(`${res.headers}\n${trailer}`);
          expect(said, `in ${ms} ms`).to.not.match(TRANSPORT_DETAIL);
          const status = /grpc-status: ?(\d+)/i.exec(said)?.[1];
          if (status === "0") continue;
          expect([status, /grpc-message: ?([^\r\n]*)/i.exec(said)?.[1]], `in ${ms} ms`).to.deep.equal([
            "4",
            CONTENT_TOO_SLOW,
          ]);
          deadlines++;
        }
      }
      expect(deadlines, "calls that met their deadline").to.be.greaterThan(0);
    });

    it("a server stream (WatchPosts over Connect) ends with deadline_exceeded in the gateway's words; no transport detail on the wire", async () => {
      for (let t = 0; t < TRIES; t++) {
        for (const ms of DEADLINES) {
          const res = await answer(
            await fetch(`${rpc}/switchyard.content.v1.ContentService/WatchPosts`, {
              method: "POST",
              headers: {
                "content-type": "application/connect+json",
                "connect-protocol-version": "1",
                "connect-timeout-ms": String(ms),
                authorization: `Bearer ${carol}`,
              },
              body: envelope(Buffer.from("{}")),
            }),
          );
          expect(`${res.headers}\n${res.text}`, `in ${ms} ms`).to.not.match(TRANSPORT_DETAIL);
          expect(res.status).to.equal(200);
          const end =
            frames(res.body)
              .find(([flags]) => (flags & 0x02) !== 0)?.[1]
              .toString("utf8") ?? "{}";
          const error = (JSON.parse(end) as { error?: { code: string; message: string } }).error;
          expect([error?.code, error?.message], `in ${ms} ms: ${end}`).to.deep.equal([
            "deadline_exceeded",
            CONTENT_TOO_SLOW,
          ]);
        }
      }
    });

    it("/v1 with X-Request-Timeout-Ms 1–5: 200, or 504 DEADLINE_EXCEEDED in the gateway's words; no transport detail", async () => {
      let deadlines = 0;
      for (let t = 0; t < TRIES; t++) {
        for (const ms of DEADLINES) {
          for (const [path, token] of [
            ["/v1/posts?limit=20", carol],
            ["/v1/catalog/items?page_size=100", alice],
          ] as const) {
            const res = await env.api.get(path, { token, headers: { "x-request-timeout-ms": String(ms) } });
            expect(
              `${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n${res.text}`,
              `${path} in ${ms} ms`,
            ).to.not.match(TRANSPORT_DETAIL);
            if (res.status === 200) continue;
            expect([res.status, res.json], `${path} in ${ms} ms`).to.deep.equal([
              504,
              { error: CONTENT_TOO_SLOW, code: "DEADLINE_EXCEEDED" },
            ]);
            deadlines++;
          }
        }
      }
      expect(deadlines, "requests that met their deadline").to.be.greaterThan(0);
    });
  });
});

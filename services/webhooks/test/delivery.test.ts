// Delivering a message, against real HTTP receivers on this machine: every delivery verifies with the
// `standardwebhooks` package (not ours) — under the current secret, and during a rotation under
// either — and a receiver refuses a changed body, a wrong secret and a stale timestamp. An attempt
// follows no redirect, reads at most 64 KiB, ends after its timeout, and never connects to an
// address the policy refuses, however the destination names it. Retries back off with jitter for 3 days.
import { expect } from "chai";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { parseNetworks, type DestinationPolicy } from "../src/domain/destinations.js";
import { FIRST_RETRY_MS, GIVE_UP_AFTER_MS, LONGEST_WAIT_MS, nextAttemptAt } from "../src/domain/retries.js";
import { signedHeaders } from "../src/domain/signatures.js";
import { newEndpointSecret } from "../src/endpoint-secrets.js";
import { attemptDelivery, type AttemptLimits } from "../src/workflow/attempt.js";
import { startReceiver } from "./support/receiver.js";

const LOOPBACK: DestinationPolicy = { allowPlainHttp: true, allowedNetworks: parseNetworks("127.0.0.0/8") };
const CLOSED: DestinationPolicy = { allowPlainHttp: true, allowedNetworks: [] };
const SHORT: AttemptLimits = { timeoutMs: 500, maxAnswerBytes: 64 * 1024, excerptBytes: 1024 };

const receiver = startReceiver;

const message = (body = '{"type":"payment.succeeded"}') => ({
  id: "evt_test",
  timestampSeconds: Math.floor(Date.now() / 1000),
  body,
});

describe("webhook delivery", function () {
  this.timeout(20_000);
  const resolveNothing = async () => [];

  describe("signatures (Standard Webhooks)", () => {
    it("verifies with the standardwebhooks package under the endpoint's secret, as received over HTTP", async () => {
      const secret = newEndpointSecret();
      const hook = await receiver((_req, res) => res.writeHead(204).end());
      try {
        const msg = message();
        const outcome = await attemptDelivery(
          { url: hook.url, headers: { ...signedHeaders(msg, [secret]) }, body: msg.body },
          { destinations: LOOPBACK, resolve: resolveNothing, limits: SHORT },
        );
        expect(outcome).to.include({ delivered: true, status: 204, error: undefined });
        const [got] = hook.received;
        expect(got!.headers["webhook-id"]).to.equal("evt_test");
        expect(new Webhook(secret).verify(got!.body, got!.headers)).to.deep.equal({
          type: "payment.succeeded",
        });
      } finally {
        await hook.close();
      }
    });

    it("signs with both secrets during a rotation: a receiver holding either verifies", () => {
      const [before, after] = [newEndpointSecret(), newEndpointSecret()];
      const msg = message();
      const headers = { ...signedHeaders(msg, [after, before]) };
      expect(headers["webhook-signature"].split(" ")).to.have.length(2);
      expect(new Webhook(before).verify(msg.body, headers)).to.deep.equal({ type: "payment.succeeded" });
      expect(new Webhook(after).verify(msg.body, headers)).to.deep.equal({ type: "payment.succeeded" });
    });

    it("lets a receiver refuse a changed body, a wrong secret and a stale timestamp", () => {
      const secret = newEndpointSecret();
      const msg = message('{"amount":100}');
      const headers = { ...signedHeaders(msg, [secret]) };
      const receiverWith = (s: string) => new Webhook(s);
      expect(() => receiverWith(secret).verify('{"amount":1000000}', headers)).to.throw(WebhookVerificationError);
      expect(() => receiverWith(newEndpointSecret()).verify(msg.body, headers)).to.throw(WebhookVerificationError);
      const stale = { ...message('{"amount":100}'), timestampSeconds: Math.floor(Date.now() / 1000) - 3600 };
      expect(() => receiverWith(secret).verify(stale.body, { ...signedHeaders(stale, [secret]) })).to.throw(
        WebhookVerificationError,
      );
    });
  });

  describe("an attempt", () => {
    it("follows no redirect, even to an address it may reach: a 3xx is not delivered", async () => {
      const inner = await receiver((_req, res) => res.writeHead(200).end("inner"));
      const outer = await receiver((_req, res) => res.writeHead(302, { location: inner.url }).end());
      try {
        const outcome = await attemptDelivery(
          { url: outer.url, headers: {}, body: "{}" },
          { destinations: LOOPBACK, resolve: resolveNothing, limits: SHORT },
        );
        expect(outcome).to.include({ delivered: false, status: 302 });
        expect(inner.connections(), "the redirect's target").to.equal(0);
      } finally {
        await inner.close();
        await outer.close();
      }
    });

    it("records a failing answer's status, latency and at most 1 KiB of it", async () => {
      const hook = await receiver((_req, res) => res.writeHead(500).end("x".repeat(5000)));
      try {
        const outcome = await attemptDelivery(
          { url: hook.url, headers: {}, body: "{}" },
          { destinations: LOOPBACK, resolve: resolveNothing, limits: SHORT },
        );
        expect(outcome).to.include({ delivered: false, status: 500, error: undefined });
        expect(outcome.excerpt).to.equal("x".repeat(1024));
        expect(outcome.latencyMs).to.be.within(0, 500);
      } finally {
        await hook.close();
      }
    });

    it("ends after its timeout when the receiver never answers, or never finishes its answer", async () => {
      const silent = await receiver(() => {});
      const trickling = await receiver((_req, res) => {
        res.writeHead(200);
        res.write("partial");
      });
      try {
        for (const hook of [silent, trickling]) {
          const started = Date.now();
          const outcome = await attemptDelivery(
            { url: hook.url, headers: {}, body: "{}" },
            { destinations: LOOPBACK, resolve: resolveNothing, limits: SHORT },
          );
          expect(outcome.error).to.equal("timed out after 500 ms");
          expect(Date.now() - started).to.be.within(450, 2_000);
        }
      } finally {
        await silent.close();
        await trickling.close();
      }
    });

    it("reads at most 64 KiB of a 10 MB answer", async () => {
      let written = 0;
      const hook = await receiver((_req, res) => {
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 97);
        const more = () => {
          while (written < 10 * 1024 * 1024) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", more);
          }
          res.end();
        };
        res.on("error", () => {});
        more();
      });
      try {
        const outcome = await attemptDelivery(
          { url: hook.url, headers: {}, body: "{}" },
          { destinations: LOOPBACK, resolve: resolveNothing, limits: SHORT },
        );
        expect(outcome.status).to.equal(200);
        expect(outcome.error).to.equal("answer cut off after 65536 bytes");
        expect(outcome.excerpt).to.have.length(1024);
      } finally {
        await hook.close();
      }
      expect(written, "the receiver could not send it all").to.be.below(10 * 1024 * 1024);
    });

    it("never connects to an address the policy refuses: written in the URL, or behind a name, resolved at the attempt", async () => {
      const hook = await receiver((_req, res) => res.writeHead(200).end());
      try {
        const names: Record<string, string[]> = {
          "rebound.example": ["127.0.0.1"],
          "mixed.example": ["93.184.216.34", "127.0.0.1"],
        };
        const resolve = async (hostname: string) => names[hostname] ?? [];
        const urls = [
          hook.url,
          `http://[::ffff:127.0.0.1]:${hook.port}/hook`,
          `http://rebound.example:${hook.port}/hook`,
          `http://mixed.example:${hook.port}/hook`,
          `http://nowhere.example:${hook.port}/hook`,
        ];
        for (const url of urls) {
          const outcome = await attemptDelivery(
            { url, headers: {}, body: "{}" },
            { destinations: CLOSED, resolve, limits: SHORT },
          );
          expect(outcome, url).to.include({ delivered: false, status: undefined });
          expect(outcome.error, url).to.match(/^destination refused: /);
        }
        expect(hook.connections()).to.equal(0);
        const https = await attemptDelivery(
          { url: hook.url, headers: {}, body: "{}" },
          { destinations: { ...LOOPBACK, allowPlainHttp: false }, resolve, limits: SHORT },
        );
        expect(https.error).to.equal("destination refused: http: is not allowed");
        // The same name, allowed by the policy: it connects to the address its lookup checked.
        const allowed = await attemptDelivery(
          { url: `http://rebound.example:${hook.port}/hook`, headers: {}, body: "{}" },
          { destinations: LOOPBACK, resolve, limits: SHORT },
        );
        expect(allowed).to.include({ delivered: true, status: 200 });
        expect(hook.connections()).to.equal(1);
      } finally {
        await hook.close();
      }
    });
    it("checks IPv6 at the connection too: a name resolving to ::1 is refused unless ::1 is allowed, then reached over IPv6", async () => {
      const hook = await receiver((_req, res) => res.writeHead(200).end(), "::1");
      try {
        const resolve = async (hostname: string) => (hostname === "v6.example" ? ["::1"] : []);
        const byName = { url: `http://v6.example:${hook.port}/hook`, headers: {}, body: "{}" };
        for (const url of [byName.url, hook.url, `http://[::ffff:127.0.0.1]:${hook.port}/hook`]) {
          const refused = await attemptDelivery({ ...byName, url }, { destinations: CLOSED, resolve, limits: SHORT });
          expect(refused.error, url).to.match(/^destination refused: /);
        }
        expect(hook.connections(), "no connection to a refused address").to.equal(0);
        const v6Loopback = { allowPlainHttp: true, allowedNetworks: parseNetworks("::1/128") };
        expect(await attemptDelivery(byName, { destinations: v6Loopback, resolve, limits: SHORT })).to.include({
          delivered: true,
          status: 200,
        });
        expect(hook.connections()).to.equal(1);
      } finally {
        await hook.close();
      }
    });
  });

  describe("retries", () => {
    const first = new Date("2026-01-01T00:00:00Z");
    it("back off exponentially from 30 s to at most 6 h apart, each wait between half and all of its step", () => {
      const at = (attempts: number, random: number) =>
        nextAttemptAt(first, first, attempts, { random: () => random })!.getTime() - first.getTime();
      expect([at(1, 0), at(1, 0.5)]).to.deep.equal([FIRST_RETRY_MS / 2, FIRST_RETRY_MS * 0.75]);
      expect(at(1, 0.999999)).to.be.within(FIRST_RETRY_MS - 1, FIRST_RETRY_MS);
      expect(at(2, 0)).to.equal(FIRST_RETRY_MS);
      expect(at(5, 0)).to.equal(8 * FIRST_RETRY_MS);
      expect(at(30, 0)).to.equal(LONGEST_WAIT_MS / 2);
      expect(at(30, 0.999999)).to.be.below(LONGEST_WAIT_MS);
    });

    it("stop after 3 days: the schedule's attempts all fall within them, then the delivery has failed", () => {
      let last = first;
      let attempts = 1;
      for (;;) {
        const next = nextAttemptAt(first, last, attempts);
        if (!next) break;
        expect(next.getTime()).to.be.greaterThan(last.getTime());
        last = next;
        attempts++;
      }
      expect(last.getTime() - first.getTime()).to.be.within(GIVE_UP_AFTER_MS - LONGEST_WAIT_MS, GIVE_UP_AFTER_MS);
      expect(attempts).to.be.within(15, 40);
    });
  });
});

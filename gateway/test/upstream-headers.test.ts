// What goes upstream with a call (runtime/upstream-headers.ts): the request id to every service, the
// caller's own token, and the client's address to identity alone.
import { expect } from "chai";
import type { Caller } from "@switchyard/platform/caller.js";
import { bearerOf, upstreamHeaders } from "../src/runtime/upstream-headers.js";

const caller = (token: string): Caller => ({
  tenantId: "acme",
  userId: 1n,
  role: "member",
  sessionId: "s1",
  expiresAt: 2_000_000_000,
  token,
});
const request = { address: "203.0.113.7", requestId: "req-1" };

describe("upstream call metadata (edge)", () => {
  it("tells identity the client's address, and no other service", () => {
    expect(upstreamHeaders("identity", undefined, request)).to.deep.equal({
      "x-request-id": "req-1",
      "x-client-address": "203.0.113.7",
    });
    for (const upstream of ["payments", "orders", "content"] as const) {
      expect(upstreamHeaders(upstream, undefined, request), upstream).to.deep.equal({ "x-request-id": "req-1" });
    }
  });

  it("vouches for the address with the gateway's own token, sent to identity alone and never without the address", () => {
    expect(upstreamHeaders("identity", undefined, request, "gateway-token")).to.deep.equal({
      "x-request-id": "req-1",
      "x-client-address": "203.0.113.7",
      "service-authorization": "Bearer gateway-token",
    });
    for (const upstream of ["payments", "orders", "content"] as const) {
      expect(upstreamHeaders(upstream, caller("t"), request, "gateway-token"), upstream).to.not.have.property(
        "service-authorization",
      );
    }
    expect(
      upstreamHeaders("identity", caller("t"), undefined, "gateway-token"),
      "no request, no address",
    ).to.deep.equal({ authorization: "Bearer t" });
  });

  it("passes the verified caller's own token as a bearer credential, to every service", () => {
    const alice = caller("token-of-alice");
    expect(upstreamHeaders("payments", alice, request).authorization).to.equal("Bearer token-of-alice");
    expect(upstreamHeaders("identity", alice, request).authorization).to.equal("Bearer token-of-alice");
    expect(upstreamHeaders("content", undefined, request)).to.not.have.property("authorization");
  });

  it("without a request (a call made outside one) sends only the caller's token", () => {
    expect(upstreamHeaders("identity", caller("t"), undefined)).to.deep.equal({ authorization: "Bearer t" });
  });

  it("gives each caller its own Authorization text, the same on every call", () => {
    const alice = caller("token-of-alice");
    const bob = caller("token-of-bob");
    expect(bearerOf(alice)).to.equal("Bearer token-of-alice");
    expect(bearerOf(alice)).to.equal(bearerOf(alice));
    expect(bearerOf(bob)).to.equal("Bearer token-of-bob");
  });
});

// Stage upstream metadata: what goes with a request's calls — at once, except to identity, whose calls
// wait for the gateway's own token that vouches for the client's address.
import { expect } from "chai";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { EdgeCall } from "../../src/pipeline/edge-call.js";
import { upstreamMetadataStage } from "../../src/pipeline/upstream-metadata.js";
import { ADDRESS, caller, record } from "./fixtures.js";

describe("pipeline: upstream metadata", () => {
  let issued = 0;
  const metadata = upstreamMetadataStage(
    new ServiceCredentials(async () => (issued++, { token: "gateway-token", expiresInSeconds: 600 })),
  );
  const call = () => new EdgeCall(ADDRESS, record(), {});

  it("gives a call to payments, orders or content its request id and the caller's token at once, without the gateway's token", () => {
    const c = call();
    c.caller = caller("acme", 7n, "t-alice");
    for (const upstream of ["payments", "orders", "content"] as const) {
      expect(metadata(c, upstream), upstream).to.deep.equal({
        "x-request-id": "req-1",
        authorization: "Bearer t-alice",
      });
    }
    expect(issued).to.equal(0);
  });

  it("sends no token for a request without a caller", () => {
    expect(metadata(call(), "content")).to.deep.equal({ "x-request-id": "req-1" });
  });

  it("gives a call to identity the client's address, vouched for by the gateway's own token", async () => {
    const pending = metadata(call(), "identity");
    expect(pending).to.be.instanceOf(Promise);
    expect(await pending).to.deep.equal({
      "x-request-id": "req-1",
      "x-client-address": ADDRESS,
      "service-authorization": "Bearer gateway-token",
    });
    expect(issued).to.equal(1);
  });

  it("fails the call when the gateway's token cannot be had", async () => {
    const failing = upstreamMetadataStage(new ServiceCredentials(() => Promise.reject(new Error("identity is down"))));
    let failure: unknown;
    await Promise.resolve(failing(call(), "identity")).catch((err: unknown) => (failure = err));
    expect(failure).to.be.instanceOf(Error).with.property("message", "identity is down");
  });
});

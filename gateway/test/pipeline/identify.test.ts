// Stage identify: who is asking decides whose quota a request draws on, before anything is drawn.
import { expect } from "chai";
import { ConnectError } from "@connectrpc/connect";
import { EdgeCall } from "../../src/pipeline/edge-call.js";
import { identifyStage, requireCaller } from "../../src/pipeline/identify.js";
import { HttpError } from "../../src/runtime/errors.js";
import { ADDRESS, caller, fakeVerifier, record } from "./fixtures.js";

const call = () => new EdgeCall(ADDRESS, record(), {});

describe("pipeline: identify", () => {
  const alice = caller("acme", 7n, "t-alice");
  const bob = caller("acme", 8n, "t-bob");
  const { verifier, verified } = fakeVerifier({ "Bearer t-alice": alice }, { "Bearer t-bob": bob });
  const identify = identifyStage(verifier);

  it("takes a request without a token as its client address's, at once", () => {
    const c = call();
    expect(identify(c, undefined)).to.equal(undefined);
    expect(c.presentedToken).to.equal(false);
    expect(c.caller).to.equal(undefined);
    expect(c.quotaKey).to.equal(`addr:${ADDRESS}`);
  });

  it("knows a token seen before at once, without a promise or a verification", () => {
    const c = call();
    const before = verified.length;
    expect(identify(c, "Bearer t-alice"), "no promise on the fast path").to.equal(undefined);
    expect(c.caller).to.equal(alice);
    expect(c.quotaKey).to.equal("user:acme:7");
    expect(verified.length).to.equal(before);
  });

  it("verifies a new token before the quota is known: the user's own quota", async () => {
    const c = call();
    const pending = identify(c, "Bearer t-bob");
    expect(pending).to.be.instanceOf(Promise);
    await pending;
    expect(c.caller).to.equal(bob);
    expect(c.refusedToken).to.equal(undefined);
    expect(c.quotaKey).to.equal("user:acme:8");
  });

  it("keeps an invalid token's refusal, and counts the request on the client address (a made-up token buys no quota)", async () => {
    const c = call();
    await identify(c, "Bearer made-up");
    expect(c.presentedToken).to.equal(true);
    expect(c.caller).to.equal(undefined);
    expect(c.refusedToken).to.be.instanceOf(ConnectError);
    expect(c.quotaKey).to.equal(`addr:${ADDRESS}`);
  });

  describe("a route's need of a user", () => {
    it("passes a verified caller on where the route needs one", () => {
      const c = call();
      c.caller = alice;
      expect(requireCaller(c, true)).to.equal(undefined);
      expect(c.caller).to.equal(alice);
    });

    it("refuses a request without a token with 401 where the route needs a user", () => {
      const refusal = requireCaller(call(), true);
      expect(refusal).to.be.instanceOf(HttpError);
      expect((refusal as HttpError).status).to.equal(401);
      expect((refusal as HttpError).code).to.equal("UNAUTHENTICATED");
    });

    it("refuses an invalid token with the reason its verification gave", async () => {
      const c = call();
      await identify(c, "Bearer made-up");
      expect(requireCaller(c, true)).to.equal(c.refusedToken);
    });

    it("passes no caller on where the route needs none, so no token goes upstream", () => {
      const c = call();
      c.caller = alice;
      expect(requireCaller(c, false)).to.equal(undefined);
      expect(c.caller).to.equal(undefined);
    });
  });
});

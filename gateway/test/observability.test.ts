// The request id at the edge: a trusted proxy's is kept (when well formed), anyone else's is replaced.
import { expect } from "chai";
import type { IncomingMessage } from "node:http";
import { requestIdOf } from "../src/runtime/observability.js";

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("request ids at the edge", () => {
  it("takes x-request-id only from behind a trusted proxy", () => {
    expect(requestIdOf(request({ "x-request-id": "envoy-1234" }), 1)).to.equal("envoy-1234");
    expect(requestIdOf(request({ "x-request-id": "client-chosen" }), 0)).to.match(UUID);
  });

  it("generates one when there is none or it is malformed (no spaces, quotes or newlines into the logs)", () => {
    expect(requestIdOf(request({}), 1)).to.match(UUID);
    for (const bad of ["with space", 'quote"', "line\nbreak", "x".repeat(129), ""])
      expect(requestIdOf(request({ "x-request-id": bad }), 1)).to.match(UUID);
  });

  it("is a new one per request", () => {
    expect(requestIdOf(request({}), 0)).to.not.equal(requestIdOf(request({}), 0));
  });
});

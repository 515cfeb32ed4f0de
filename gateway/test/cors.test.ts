// GATEWAY_CORS_ORIGINS: exact origins as a browser sends them, or the gateway refuses to start.
import { expect } from "chai";
import { gatewayConfigFrom } from "../src/settings.js";
import { parseOrigins } from "../src/runtime/cors.js";

/** What the gateway cannot start without: its own secret at identity. */
const REQUIRED = { GATEWAY_SERVICE_SECRET: "a-secret-of-the-gateway-at-least-32-characters" };

describe("gateway: GATEWAY_CORS_ORIGINS", () => {
  it("takes a comma-separated list of exact origins (spaces and empty entries ignored)", () => {
    expect(parseOrigins("https://app.example, http://127.0.0.1:3000,,")).to.deep.equal([
      "https://app.example",
      "http://127.0.0.1:3000",
    ]);
  });

  it("refuses what a browser never sends as an Origin: a path, a trailing slash, another scheme, a non-URL", () => {
    for (const bad of ["https://app.example/", "https://app.example/path", "ftp://app.example", "app.example", "*"]) {
      expect(() => parseOrigins(bad), bad).to.throw(/origin/);
    }
  });

  it("is optional, and a bad value stops the gateway's configuration naming the setting", () => {
    expect(gatewayConfigFrom(REQUIRED).corsOrigins).to.equal(undefined);
    expect(() => gatewayConfigFrom({ ...REQUIRED, GATEWAY_CORS_ORIGINS: "https://app.example/" })).to.throw(
      /GATEWAY_CORS_ORIGINS/,
    );
  });
});

// Version negotiation, deprecation headers and the v2 document (pure: no mesh).
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { HttpError } from "@switchyard/gateway/runtime/errors.js";
import { loadApiDocument, openApiPath, representationsOf } from "@switchyard/gateway/runtime/openapi.js";
import {
  checkSunset,
  deprecatedOperations,
  deprecationHeaders,
  negotiateVersion,
  publishedVersions,
  V1_DEPRECATED_AT,
} from "@switchyard/gateway/runtime/versions.js";
import { gatewayConfigFrom } from "@switchyard/gateway";
import { V2_PATH, v2Document } from "../../scripts/openapi-v2.js";

/** What the gateway cannot start without: its own secret at identity. */
const REQUIRED = { GATEWAY_SERVICE_SECRET: "a-secret-of-the-gateway-at-least-32-characters" };

const PUBLISHED = [1, 2];
const refusal = (work: () => unknown) => {
  try {
    work();
    return undefined;
  } catch (err) {
    return err instanceof HttpError ? `${err.status} ${err.code}` : String(err);
  }
};

describe("API versions", () => {
  describe("negotiation", () => {
    it("takes the path's version without a vendor media type", () => {
      expect(negotiateVersion(1, undefined, undefined, PUBLISHED)).to.deep.equal({ major: 1, mediaType: undefined });
      expect(negotiateVersion(2, "application/json", "application/json", PUBLISHED)).to.deep.equal({
        major: 2,
        mediaType: undefined,
      });
      expect(negotiateVersion(1, "text/event-stream", undefined, PUBLISHED)).to.deep.equal({
        major: 1,
        mediaType: undefined,
      });
    });

    it("takes the version a vendor Accept asks for on a v1 path, the highest q first", () => {
      expect(negotiateVersion(1, "application/vnd.api.v2+json", undefined, PUBLISHED)).to.deep.equal({
        major: 2,
        mediaType: "application/vnd.api.v2+json",
      });
      expect(
        negotiateVersion(
          1,
          "application/vnd.api.v1+json;q=0.4, application/vnd.api.v2+json;q=0.9",
          undefined,
          PUBLISHED,
        ).major,
      ).to.equal(2);
      expect(
        negotiateVersion(1, "application/vnd.api.v2+json;q=0.1, application/vnd.api.v1+json", undefined, PUBLISHED)
          .major,
      ).to.equal(1);
      expect(
        negotiateVersion(1, "APPLICATION/VND.API.V2+JSON", undefined, PUBLISHED).major,
        "media types are case-insensitive",
      ).to.equal(2);
    });

    it("reads the body's version from Content-Type when Accept names none; the answer is then plain JSON of that version", () => {
      expect(negotiateVersion(1, undefined, "application/vnd.api.v2+json", PUBLISHED)).to.deep.equal({
        major: 2,
        mediaType: undefined,
      });
    });

    it("refuses an unpublished or malformed vendor version with 406, unless plain JSON is accepted too", () => {
      for (const accept of [
        "application/vnd.api.v9+json",
        "application/vnd.api.v0+json",
        "application/vnd.api.v2x+json",
        "application/vnd.api+json",
        "application/vnd.api.v2+json;q=0",
      ]) {
        const got = refusal(() => negotiateVersion(1, accept, undefined, PUBLISHED));
        if (accept.endsWith("q=0"))
          expect(got, accept).to.equal(undefined); // q=0 means "not this": nothing vendor asked
        else expect(got, accept).to.equal("406 NOT_ACCEPTABLE");
      }
      expect(
        negotiateVersion(1, "application/vnd.api.v9+json, application/json;q=0.2", undefined, PUBLISHED),
      ).to.deep.equal({ major: 1, mediaType: undefined });
      // A body's type names a version only when it names a published one; otherwise it is just JSON.
      expect(negotiateVersion(1, undefined, "application/vnd.api.v9+json", PUBLISHED)).to.deep.equal({
        major: 1,
        mediaType: undefined,
      });
      expect(negotiateVersion(1, undefined, "application/vnd.api+json", PUBLISHED)).to.deep.equal({
        major: 1,
        mediaType: undefined,
      });
    });

    it("refuses another version by media type on a v2 path: the path says which it is", () => {
      expect(refusal(() => negotiateVersion(2, "application/vnd.api.v1+json", undefined, PUBLISHED))).to.equal(
        "406 NOT_ACCEPTABLE",
      );
      expect(negotiateVersion(2, "application/vnd.api.v2+json", undefined, PUBLISHED).major).to.equal(2);
    });
  });

  describe("deprecation", () => {
    it("writes Deprecation as an RFC 9745 structured date, Sunset as an HTTP-date, and both Links", () => {
      const [v1] = publishedVersions(new Date("2027-08-23T00:00:00Z"));
      const headers = deprecationHeaders(v1!, "/v2/tenants/acme/users/1");
      expect(headers.deprecation).to.equal(`@${V1_DEPRECATED_AT.getTime() / 1000}`);
      expect(headers.sunset).to.equal("Mon, 23 Aug 2027 00:00:00 GMT");
      expect(headers.link).to.equal(
        '</v2/tenants/acme/users/1>; rel="successor-version", </versions>; rel="deprecation"; type="application/json"',
      );
    });

    it("takes a sunset 6 to 12 months after the deprecation, and refuses any other at start", () => {
      expect(gatewayConfigFrom(REQUIRED).v1SunsetAt.toISOString()).to.equal("2027-08-23T00:00:00.000Z");
      expect(gatewayConfigFrom({ ...REQUIRED, GATEWAY_V1_SUNSET: "2027-05-23" }).v1SunsetAt.toISOString()).to.equal(
        "2027-05-23T00:00:00.000Z",
      );
      for (const bad of ["2027-05-22", "2027-11-24", "next year", "2027-13-01T00:00:00Z"])
        expect(() => gatewayConfigFrom({ ...REQUIRED, GATEWAY_V1_SUNSET: bad }), bad).to.throw(/GATEWAY_V1_SUNSET/);
      expect(() => checkSunset(new Date("2027-11-23T00:00:00Z"), V1_DEPRECATED_AT)).not.to.throw();
    });

    it("deprecates exactly the v1 operations whose representation changed in v2: the user routes", () => {
      const v1 = representationsOf(loadApiDocument(openApiPath(1)));
      const v2 = representationsOf(loadApiDocument(openApiPath(2)));
      // v2 has every operation of v1, and the ones made after v1's deprecation (webhook endpoints).
      expect([...v2.keys()].filter((id) => !v1.has(id)).sort()).to.deep.equal([
        "createWebhookEndpoint",
        "deleteWebhookEndpoint",
        "getWebhookEndpoint",
        "listWebhookEndpointDeliveries",
        "listWebhookEndpoints",
        "redeliverWebhookDelivery",
        "rotateWebhookEndpointSecret",
        "sendWebhookTestEvent",
        "updateWebhookEndpoint",
      ]);
      expect([...v1.keys()].filter((id) => !v2.has(id))).to.deep.equal([]);
      const changed = [...v1]
        .filter(([id, r]) => v2.get(id) !== r)
        .map(([id]) => id)
        .sort();
      expect(changed).to.deep.equal(["createUser", "getUser", "listUsers"]);
      // What the gateway announces: v1 deprecates exactly those, with v2 as successor; v2 deprecates nothing.
      const deprecations = deprecatedOperations(publishedVersions(new Date("2027-08-23T00:00:00Z")), (major) =>
        major === 1 ? v1 : v2,
      );
      expect([...deprecations.keys()]).to.deep.equal([1]);
      expect(deprecations.get(1)!.successor).to.equal(2);
      expect([...deprecations.get(1)!.operations].sort()).to.deep.equal(changed);
    });
  });

  it("gateway/openapi/v2.yaml is what npm run openapi:v2 makes of v1.yaml (run it after changing v1)", () => {
    const v1 = readFileSync(openApiPath(1), "utf8");
    expect(readFileSync(V2_PATH, "utf8") === v2Document(v1), "v2.yaml is stale: npm run openapi:v2").to.equal(true);
  });
});

describe("deprecated-route usage log", () => {
  it("keeps at most a bounded number of tenants named by callers without a token in one line; verified tenants all count", async () => {
    const { DeprecatedRouteUsage } = await import("@switchyard/gateway/runtime/versions.js");
    const lines: { usage: { tenant: string; route: string; count: number }[] }[] = [];
    const logger = { info: (line: { usage: { tenant: string; route: string; count: number }[] }) => lines.push(line) };
    const usage = new DeprecatedRouteUsage(logger as never, 3_600_000);
    try {
      for (let i = 0; i < 1_500; i++) usage.count(`made-up-${i}`, "GET /v1/x", false);
      usage.count("acme", "GET /v1/x", true);
      usage.flush();
      const entries = lines[0]!.usage;
      expect(entries.length).to.be.at.most(1_002);
      expect(
        entries.reduce((n, e) => n + e.count, 0),
        "every request counted",
      ).to.equal(1_501);
      expect(entries.find((e) => e.tenant === "acme")?.count).to.equal(1);
    } finally {
      usage.stop();
    }
  });
});

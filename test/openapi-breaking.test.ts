// The build check of contract §9.5: additive changes pass, breaking ones are named.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { describeBreaks } from "../scripts/ci/check-openapi-breaking.js";
import { breakingChanges } from "../scripts/ci/openapi-breaking.js";

const doc = () =>
  parse(readFileSync(new URL("../gateway/openapi/v1.yaml", import.meta.url), "utf8")) as Record<string, any>;

describe("OpenAPI breaking-change check", () => {
  it("finds nothing between the document and itself", () => {
    expect(breakingChanges(doc(), doc())).to.deep.equal([]);
  });

  it("lets additive changes through: a new optional field, a new response field, a new operation", () => {
    const next = doc();
    next.components.schemas.PaymentCreate.properties.description = { type: "string" };
    next.components.schemas.Payment.properties.description = { type: "string" };
    next.paths["/v1/things"] = { get: { operationId: "listThings", responses: { "200": { description: "ok" } } } };
    next.components.schemas.PaymentCreate.properties.source.maxLength = 1000;
    expect(breakingChanges(doc(), next)).to.deep.equal([]);
  });

  const cases: [string, (d: Record<string, any>) => void, RegExp][] = [
    ["a removed operation", (d) => delete d.paths["/v1/payments/{payment_id}"].get, /operation removed/],
    ["a removed response field", (d) => delete d.components.schemas.Payment.properties.source, /field removed/],
    [
      "a renamed response field",
      (d) => {
        d.components.schemas.User.properties.name = d.components.schemas.User.properties.full_name;
        delete d.components.schemas.User.properties.full_name;
      },
      /full_name: field removed/,
    ],
    ["a changed type", (d) => (d.components.schemas.Payment.properties.amount.type = "string"), /type changed/],
    [
      "a new required request field",
      (d) => {
        d.components.schemas.RefundCreate.properties.note = { type: "string" };
        d.components.schemas.RefundCreate.required.push("note");
      },
      /note: became required/,
    ],
    [
      "tightened validation",
      (d) => (d.components.schemas.PaymentCreate.properties.source.maxLength = 10),
      /maxLength tightened/,
    ],
    ["a tightened enum", (d) => (d.components.schemas.Role.enum = ["admin"]), /enum tightened/],
    [
      "a parameter that became required",
      (d) => (d.components.parameters.Cursor.required = true),
      /parameter became required/,
    ],
    ["a changed error envelope", (d) => delete d.components.schemas.Error.properties.code, /field removed/],
    [
      "a changed default",
      (d) => (d.components.parameters.Limit.schema.default = 50),
      /query:limit: default changed \(20 → 50\)/,
    ],
    [
      "a removed default",
      (d) => delete d.components.parameters.Limit.schema.default,
      /query:limit: default removed \(was 20\)/,
    ],
    [
      "a removed query parameter",
      (d) => d.paths["/v1/payments"].get.parameters.pop(),
      /query:cursor: parameter removed/,
    ],
    [
      "a smaller maxItems",
      (d) => (d.components.schemas.OrderCreate.properties.items.maxItems = 10),
      /items: maxItems tightened \(100 → 10\)/,
    ],
    [
      "a new format on an input",
      (d) => (d.components.schemas.SessionCreate.properties.email.format = "email"),
      /email: format tightened/,
    ],
    [
      "an error envelope under another media type",
      (d) => {
        for (const r of Object.values<any>(d.components.responses))
          r.content = { "application/problem+json": r.content["application/json"] };
      },
      /→ 404: error envelope changed: media type application\/json removed/,
    ],
  ];
  it("prints a break shared by every operation once, with a count", () => {
    const next = doc();
    delete next.components.schemas.Error.properties.code;
    const lines = describeBreaks(breakingChanges(doc(), next));
    expect(lines.find((l) => l.includes("→ 404.code: error envelope changed: field removed"))).to.match(
      /\(and \d+ more operations\)$/,
    );
    expect(lines.length).to.be.lessThan(20);
  });

  for (const [name, change, expected] of cases) {
    it(`names ${name}`, () => {
      const next = doc();
      change(next);
      const found = breakingChanges(doc(), next).map((b) => `${b.where}: ${b.what}`);
      expect(found.join("\n")).to.match(expected);
    });
  }

  describe("the webhooks (v2: what partners' endpoints receive)", () => {
    const v2 = () =>
      parse(readFileSync(new URL("../gateway/openapi/v2.yaml", import.meta.url), "utf8")) as Record<string, any>;
    const found = (change: (d: Record<string, any>) => void) => {
      const next = v2();
      change(next);
      return breakingChanges(v2(), next).map((b) => `${b.where}: ${b.what}`);
    };

    it("lets a new event type and a new payload field through", () => {
      expect(
        found((d) => {
          d.webhooks["order.refunded"] = d.webhooks["order.cancelled"];
          d.components.schemas.PaymentSucceededEvent.properties.livemode = { type: "boolean" };
        }),
      ).to.deep.equal([]);
    });

    it("names an event no longer sent, a payload field removed and a resource's field removed", () => {
      expect(found((d) => delete d.webhooks["refund.succeeded"])).to.deep.equal([
        "webhook refund.succeeded: webhook removed",
      ]);
      expect(found((d) => delete d.components.schemas.OrderPaidEvent.properties.tenant_id).join("\n")).to.match(
        /webhook order\.paid.*tenant_id: field removed/,
      );
      expect(found((d) => delete d.components.schemas.Refund.properties.amount).join("\n")).to.match(
        /webhook refund\.succeeded.*amount: field removed/,
      );
    });
  });
});

// Test-only fault points (refused outside NODE_ENV=test), a service's own token (kept, renewed
// once, shared by concurrent callers) and secret settings (never echoed).
import { expect } from "chai";
import { ConfigError, loadConfig, parse, setting } from "@switchyard/platform/config.js";
import { Faults, parseFaults, faultsSetting } from "@switchyard/platform/faults.js";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";

describe("fault points", () => {
  const points = ["orders.exit-after-charge", "payments.hold-before-commit"];

  it("are refused unless NODE_ENV is test, so no deployment can carry one", () => {
    const spec = { faults: faultsSetting(points) };
    expect(() => loadConfig(spec, { FAULTS: "orders.exit-after-charge=0.5" })).to.throw(ConfigError, /NODE_ENV=test/);
    expect(() => loadConfig(spec, { FAULTS: "orders.exit-after-charge=0.5", NODE_ENV: "production" })).to.throw(
      ConfigError,
      /NODE_ENV=test/,
    );
    expect(loadConfig(spec, {}).faults).to.equal(undefined);
    expect([...loadConfig(spec, { FAULTS: "orders.exit-after-charge=0.5", NODE_ENV: "test" }).faults!]).to.deep.equal([
      ["orders.exit-after-charge", { probability: 0.5, ms: 0 }],
    ]);
  });

  it("name known points with a probability from 0 to 1 and an optional hold in ms", () => {
    const env = { NODE_ENV: "test" };
    expect([
      ...parseFaults("payments.hold-before-commit=0.25:3000, orders.exit-after-charge=1", env, points),
    ]).to.deep.equal([
      ["payments.hold-before-commit", { probability: 0.25, ms: 3000 }],
      ["orders.exit-after-charge", { probability: 1, ms: 0 }],
    ]);
    for (const bad of [
      "orders.exit-after-charge",
      "orders.exit-after-charge=2",
      "orders.exit-after-charge=-0.1",
      "nope=0.5",
      "orders.exit-after-charge=0.5:x",
    ]) {
      expect(() => parseFaults(bad, env, points), bad).to.throw();
    }
  });

  it("fire with their probability, and a hold stalls for its time", async () => {
    const plan = parseFaults(
      "payments.hold-before-commit=1:50,orders.exit-after-charge=0",
      { NODE_ENV: "test" },
      points,
    );
    const faults = new Faults(plan);
    expect(faults.fires("orders.exit-after-charge")).to.equal(false);
    expect(faults.fires("payments.hold-before-commit")).to.equal(true);
    expect(new Faults().fires("payments.hold-before-commit"), "no plan, no fault").to.equal(false);
    const started = performance.now();
    await faults.holdIfFires("payments.hold-before-commit");
    expect(performance.now() - started).to.be.at.least(45);
  });
});

describe("ServiceCredentials", () => {
  it("fetches the token once for concurrent callers, keeps it, and renews it after half its lifetime", async () => {
    let now = 0;
    let issued = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const credentials = new ServiceCredentials(
      async () => {
        issued++;
        await gate;
        return { token: `t${issued}`, expiresInSeconds: 300 };
      },
      () => now,
    );
    const first = Promise.all([credentials.token(), credentials.token(), credentials.token()]);
    release();
    expect(await first).to.deep.equal(["t1", "t1", "t1"]);
    now = 149_000;
    expect(await credentials.token()).to.equal("t1");
    now = 151_000;
    expect(await credentials.token()).to.equal("t2");
    expect(issued).to.equal(2);
  });

  it("tries again after a failure instead of keeping it", async () => {
    let calls = 0;
    const credentials = new ServiceCredentials(async () => {
      calls++;
      if (calls === 1) throw new Error("identity is down");
      return { token: "ok", expiresInSeconds: 300 };
    });
    expect(await credentials.token().catch((e: Error) => e.message)).to.equal("identity is down");
    expect(await credentials.token()).to.equal("ok");
  });
});

describe("secret settings", () => {
  it("refuse a malformed secret without repeating it in the error", () => {
    const spec = {
      secret: setting(
        "SOME_SECRET",
        parse.secretMatching(/^[\x21-\x7e]{32,}$/, "a secret of at least 32 visible ASCII characters"),
        "a secret",
      ),
    };
    const leaked = "short-but-still-secret";
    let message = "";
    try {
      loadConfig(spec, { SOME_SECRET: leaked });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).to.include("SOME_SECRET");
    expect(message).not.to.include(leaked);
  });
});

// AsyncResource.prototype.bind as installed by the platform's gRPC client (grpc/async-resource-bind.ts):
// the same behaviour as Node's, without a new prototype per bound function — and Node's own HTTP/2
// client, which binds every request with it, still works.
import { expect } from "chai";
import { AsyncResource, executionAsyncId } from "node:async_hooks";
import { connect, createServer, type Http2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import "../src/grpc/client.js";
import { asyncResourceBindInstalled, installAsyncResourceBind } from "../src/grpc/async-resource-bind.js";

describe("AsyncResource.prototype.bind (installed by the platform client)", () => {
  it("is installed (Node 20 and 24 make an accessor per bound function), once: installing again changes nothing", () => {
    expect(asyncResourceBindInstalled()).to.equal(Number(process.versions.node.split(".")[0]) < 25);
    const installed = AsyncResource.prototype.bind;
    installAsyncResourceBind();
    expect(AsyncResource.prototype.bind).to.equal(installed);
  });

  it("runs the function in the resource's scope, with its this, arguments, result and length", () => {
    const resource = new AsyncResource("test");
    const target = function (this: unknown, a: number, b: number) {
      return { id: executionAsyncId(), self: this, sum: a + b };
    };
    const bound = resource.bind(target);
    const receiver = { name: "receiver" };
    const result = bound.call(receiver, 2, 3);
    expect(result.id).to.equal(resource.asyncId());
    expect(result.self).to.equal(receiver);
    expect(result.sum).to.equal(5);
    expect(bound.length).to.equal(2);

    // thisArg is Node's second parameter, which @types/node does not declare.
    const bindWithThis = resource.bind.bind(resource) as unknown as (
      fn: typeof target,
      thisArg: unknown,
    ) => typeof target;
    const withThis = bindWithThis(target, receiver);
    expect(withThis.call({ other: true }, 1, 1).self).to.equal(receiver);
    expect(AsyncResource.bind((x: number) => x * 2)(21)).to.equal(42);
    expect(bound.name).to.equal("bound");
  });

  it("gives every bound function its target's length and arguments, whatever that length (with and without a this)", () => {
    const resource = new AsyncResource("test");
    const targets = [
      function (this: unknown, ...rest: number[]) {
        return [this, ...rest];
      },
      function (this: unknown, a: number, ...rest: number[]) {
        return [this, a, ...rest];
      },
      function (this: unknown, a: number, b: number, ...rest: number[]) {
        return [this, a, b, ...rest];
      },
      function (this: unknown, a: number, b: number, c: number, ...rest: number[]) {
        return [this, a, b, c, ...rest];
      },
      function (this: unknown, a: number, b: number, c: number, d: number, e: number, ...rest: number[]) {
        return [this, a, b, c, d, e, ...rest];
      },
    ];
    const bindWithThis = resource.bind.bind(resource) as unknown as (
      fn: (...args: number[]) => unknown[],
      thisArg: unknown,
    ) => (...args: number[]) => unknown[];
    const receiver = { name: "receiver" };
    for (const target of targets) {
      const bound = resource.bind(target);
      expect(bound.length, `length ${target.length}`).to.equal(target.length);
      expect(bound.name).to.equal("bound");
      expect(bound.call(receiver, 1, 2, 3, 4, 5, 6, 7)).to.deep.equal([receiver, 1, 2, 3, 4, 5, 6, 7]);
      expect(bound.call(receiver)).to.deep.equal(target.call(receiver));
      const withThis = bindWithThis(target, receiver);
      expect(withThis.length, `length ${target.length} with a this`).to.equal(target.length);
      expect(withThis.call({ other: true }, 1, 2, 3, 4, 5, 6, 7)).to.deep.equal([receiver, 1, 2, 3, 4, 5, 6, 7]);
    }
  });

  it("keeps the deprecated asyncResource accessor (DEP0172), one shared accessor, no new prototypes", async () => {
    const resource = new AsyncResource("test");
    const bound = resource.bind(() => 1) as (() => number) & { asyncResource: AsyncResource };
    const other = new AsyncResource("test").bind(() => 2);
    const warnings: (Error & { code?: string })[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    // Node warns once per process: forget an earlier test's warning, then read and write twice.
    delete (process as unknown as Record<symbol, unknown>)[Symbol.for("switchyard.asyncResourceBind.warned")];
    try {
      expect(bound.asyncResource).to.equal(resource);
      const replacement = new AsyncResource("other");
      bound.asyncResource = replacement;
      expect(bound.asyncResource).to.equal(replacement);
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.map((w) => [w.name, w.code])).to.deep.equal([["DeprecationWarning", "DEP0172"]]);
    expect(Object.getPrototypeOf(bound)).to.equal(Function.prototype);
    const accessor = (f: unknown) => Object.getOwnPropertyDescriptor(f, "asyncResource")!;
    expect(accessor(bound).get).to.be.a("function").and.equal(accessor(other).get);
    expect(Object.getPrototypeOf(accessor(bound).get)).to.equal(Function.prototype);
    expect(Object.keys(bound)).to.deep.equal(["asyncResource"]);
  });

  it("refuses a non-function as Node does", () => {
    expect(() => new AsyncResource("test").bind(42 as never))
      .to.throw(TypeError)
      .with.property("code", "ERR_INVALID_ARG_TYPE");
  });

  it("leaves Node's HTTP/2 client working (it binds every request's start with it)", async () => {
    const server: Http2Server = createServer((req, res) => res.end(`hello ${req.url}`));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const bodies = await Promise.all(
        [1, 2, 3].map(
          (n) =>
            new Promise<string>((resolve, reject) => {
              const stream = session.request({ ":path": `/${n}` });
              let body = "";
              stream
                .setEncoding("utf8")
                .on("data", (d: string) => (body += d))
                .on("end", () => resolve(body))
                .on("error", reject);
              stream.end();
            }),
        ),
      );
      expect(bodies).to.deep.equal(["hello /1", "hello /2", "hello /3"]);
    } finally {
      session.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

// How peers are addressed and how their channels spread and retry calls: the address forms a
// setting accepts, and the service config a channel is opened with (round robin; retries on
// UNAVAILABLE for the methods the proto marks free of side effects, and no others).
import { expect } from "chai";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { parse } from "@switchyard/platform/config.js";
import { serviceConfig } from "@switchyard/platform/grpc";

describe("peer addresses and channel service config", () => {
  it("accepts host:port, dns:///host:port and a static ipv4 list; refuses anything else", () => {
    for (const ok of [
      "payments:50052",
      "127.0.0.1:50052",
      "[::1]:50052",
      "dns:///payments.switchyard.svc.cluster.local:50052",
      "dns:payments:50052",
      "ipv4:127.0.0.1:1,127.0.0.1:2",
    ]) {
      expect(parse.address(ok), ok).to.equal(ok);
    }
    for (const bad of [
      "payments",
      "http://payments:50052",
      "dns:///payments",
      "ipv4:payments:1",
      "ipv4:127.0.0.1:1,",
      "unix:///tmp/x",
      "payments:50052 ",
    ]) {
      expect(() => parse.address(bad), bad).to.throw(/expected host:port/);
    }
  });

  it("balances round robin and retries only reads, only on UNAVAILABLE", () => {
    const config = JSON.parse(serviceConfig([PaymentService, OrderService])) as {
      loadBalancingConfig: unknown[];
      retryThrottling: unknown;
      methodConfig: {
        name: { service: string; method: string }[];
        retryPolicy: { maxAttempts: number; retryableStatusCodes: string[] };
      }[];
    };
    expect(config.loadBalancingConfig).to.deep.equal([{ round_robin: {} }]);
    expect(config.retryThrottling, "retries held to a budget").to.deep.equal({ maxTokens: 100, tokenRatio: 0.1 });
    expect(config.methodConfig).to.have.length(1);
    const retried = config.methodConfig[0]!.name.map((n) => `${n.service.split(".").pop()}/${n.method}`).sort();
    expect(retried).to.deep.equal(
      [
        "PaymentService/GetPayment",
        "PaymentService/ListPayments",
        "PaymentService/GetRefund",
        "PaymentService/ListRefunds",
        "OrderService/GetOrder",
        "OrderService/ListUserOrders",
        "OrderService/ListItems",
        "OrderService/ListDiscounts",
      ].sort(),
    );
    expect(config.methodConfig[0]!.retryPolicy.retryableStatusCodes).to.deep.equal(["UNAVAILABLE"]);
    expect(config.methodConfig[0]!.retryPolicy.maxAttempts).to.equal(3);
  });

  it("never retries a method that changes something, in any service", () => {
    const names = (
      JSON.parse(serviceConfig([PaymentService, OrderService, IdentityService, ContentService])) as {
        methodConfig: { name: { method: string }[] }[];
      }
    ).methodConfig[0]!.name.map((n) => n.method);
    for (const m of names) expect(m, `${m} is retried`).to.match(/^(Get|List|BatchGet|Watch)/);
    for (const writer of [
      "CreatePayment",
      "CreateRefund",
      "PayOrder",
      "CreateOrder",
      "CancelOrder",
      "CreateSession",
      "DeleteSession",
      "CreatePost",
      "ImportItems",
    ]) {
      expect(names, writer).not.to.include(writer);
    }
  });
});

// The whole mesh over mutual TLS (GRPC_TLS_*), each process with its own certificate naming it
// (spiffe://switchyard/<service>) in a Secret mounted the kubelet's way (test/support/pki.ts). A
// server refuses a client without a certificate from the CA; a client refuses a server whose
// certificate names another service. Then every certificate and the CA are rotated while requests
// flow through every hop — trust in the new CA added beside the old one, new certificates from it,
// the old CA dropped — with servers closing connections every 1.5 s so that new handshakes happen
// throughout: no request fails, and afterwards the old certificate is refused. Between the two, a
// service is known by its certificate: payments takes an order's charge and its key lookups only
// from orders', identity's operator RPC only from the operator's, and a service token only from the
// workload it belongs to.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { credentials } from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import { KeyedOperation, PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import { createServiceClient, openChannel, type ChannelSecurity } from "@switchyard/platform/grpc";
import type { ServiceName } from "../../scripts/mesh.js";
import { ALICE, startE2eMesh, type E2eMesh } from "../support/http.js";
import { TestCa, tlsEnv, writeMountedSecret, type Issued } from "../support/pki.js";

const PROCESSES: ServiceName[] = ["identity", "payments", "orders", "content", "webhooks", "gateway"];
/** The service credentials at identity, known here so that a test can hold orders' own token. */
const ORDERS_SECRET = randomBytes(32).toString("base64url");
const GATEWAY_SECRET = randomBytes(32).toString("base64url");
const PAYMENTS_SECRET = randomBytes(32).toString("base64url");
const RELOAD_MS = 200;
const CONNECTION_AGE_MS = 1_500;
const spiffe = (service: string) => `spiffe://switchyard/${service}`;

/** A workload's certificate from `ca`: its SPIFFE ID, and the names a tool would dial it by. */
const issueFor = (ca: TestCa, service: string): Issued =>
  ca.issue(service, { uris: [spiffe(service)], dnsNames: [service, "localhost"], ips: ["127.0.0.1"] });

/** A channel's security with the given client pair (or none), trusting `caPem`, expecting `peer`'s SPIFFE ID. */
function clientSecurity(caPem: string, peer: string, pair?: Issued): ChannelSecurity {
  return {
    credentials: credentials.createSsl(
      Buffer.from(caPem),
      pair ? Buffer.from(pair.keyPem) : null,
      pair ? Buffer.from(pair.certPem) : null,
      {
        checkServerIdentity: (_host, cert) =>
          cert.subjectaltname?.split(/,\s*/).includes(`URI:${spiffe(peer)}`)
            ? undefined
            : new Error(`not ${peer}: ${cert.subjectaltname}`),
      },
    ),
    options: { "grpc.ssl_target_name_override": peer },
  };
}

const codeOf = (call: Promise<unknown>): Promise<Code | "OK"> =>
  call.then(
    () => "OK" as const,
    (err: unknown) => ConnectError.from(err).code,
  );

/** A port nothing listens on now (for a setting the mesh launcher does not hand over). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A health check of `port` with this security (none: plaintext): OK, or the code it failed with. */
async function healthCheck(port: number, security?: ChannelSecurity): Promise<"SERVING" | Code> {
  const channel = openChannel(`127.0.0.1:${port}`, [], { "grpc.initial_reconnect_backoff_ms": 100 }, security);
  try {
    const reply = await createServiceClient(Health, channel).check({ service: "" }, { timeoutMs: 3_000 });
    return reply.status === HealthCheckResponse_ServingStatus.SERVING ? "SERVING" : Code.Unknown;
  } catch (err) {
    return ConnectError.from(err).code;
  } finally {
    channel.close();
  }
}

describe("e2e: mutual TLS between every process, and a rotation of every certificate under load", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let secrets: string;
  let alice: string;
  let paymentsHealthPort: number;
  const oldCa = new TestCa("switchyard test CA 1");
  const newCa = new TestCa("switchyard test CA 2");
  const oldPairs = new Map(PROCESSES.map((p) => [p, issueFor(oldCa, p)] as const));
  const dirOf = (p: ServiceName) => join(secrets, p);

  before(async function () {
    this.timeout(180_000);
    secrets = mkdtempSync(join(tmpdir(), "switchyard-mtls-"));
    paymentsHealthPort = await freePort();
    for (const p of PROCESSES)
      writeMountedSecret(dirOf(p), {
        "tls.crt": oldPairs.get(p)!.certPem,
        "tls.key": oldPairs.get(p)!.keyPem,
        "ca.crt": oldCa.certPem,
      });
    env = await startE2eMesh("mtls", {
      env: {
        GRPC_TLS_RELOAD_INTERVAL_MS: String(RELOAD_MS),
        GRPC_MAX_CONNECTION_AGE_MS: String(CONNECTION_AGE_MS),
        GRPC_MAX_CONNECTION_AGE_GRACE_MS: "1000",
      },
      envFor: {
        ...Object.fromEntries(PROCESSES.map((p) => [p, tlsEnv(dirOf(p))])),
        identity: {
          ...tlsEnv(dirOf("identity")),
          IDENTITY_SERVICE_CREDENTIALS: `orders:${ORDERS_SECRET},gateway:${GATEWAY_SECRET},payments:${PAYMENTS_SECRET}`,
        },
        orders: { ...tlsEnv(dirOf("orders")), ORDERS_SERVICE_SECRET: ORDERS_SECRET },
        payments: {
          ...tlsEnv(dirOf("payments")),
          GRPC_HEALTH_PORT: String(paymentsHealthPort),
          PAYMENTS_SERVICE_SECRET: PAYMENTS_SECRET,
        },
        gateway: { ...tlsEnv(dirOf("gateway")), GATEWAY_SERVICE_SECRET: GATEWAY_SECRET },
      },
    });
    alice = await env.api.login(ALICE);
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
    if (secrets) rmSync(secrets, { recursive: true, force: true });
  });

  describe("who may connect", () => {
    it("a plaintext client is refused by every service", async () => {
      for (const p of ["identity", "payments", "orders", "content"] as const)
        expect(await healthCheck(env.mesh.ports[p]), p).to.equal(Code.Unavailable);
    });

    it("a TLS client without a certificate, or with one from another CA, is refused; with one from the CA it is served", async () => {
      const port = env.mesh.ports.payments;
      const stranger = new TestCa("not the mesh's CA");
      expect(await healthCheck(port, clientSecurity(oldCa.certPem, "payments")), "no client certificate").to.equal(
        Code.Unavailable,
      );
      expect(
        await healthCheck(port, clientSecurity(oldCa.certPem, "payments", issueFor(stranger, "orders"))),
        "another CA's",
      ).to.equal(Code.Unavailable);
      expect(await healthCheck(port, clientSecurity(oldCa.certPem, "payments", oldPairs.get("orders")))).to.equal(
        "SERVING",
      );
    });

    it("GRPC_HEALTH_PORT serves grpc.health.v1 in plaintext for the kubelet's probes, and nothing else", async () => {
      expect(await healthCheck(paymentsHealthPort)).to.equal("SERVING");
      const channel = openChannel(`127.0.0.1:${paymentsHealthPort}`);
      try {
        const request = { tenantId: "acme", idempotencyKey: randomUUID(), operation: KeyedOperation.CREATE_PAYMENT };
        expect(
          await codeOf(
            createServiceClient(PaymentService, channel).resolveIdempotencyKey(request, { timeoutMs: 3_000 }),
          ),
        ).to.equal(Code.Unimplemented);
      } finally {
        channel.close();
      }
    });

    it("a client checks the server's name: a channel meant for identity refuses payments' certificate", async () => {
      expect(
        await healthCheck(env.mesh.ports.payments, clientSecurity(oldCa.certPem, "identity", oldPairs.get("orders"))),
      ).to.equal(Code.Unavailable);
    });
  });

  describe("service identity from the certificate", () => {
    /** A client of `service` on `peer`'s port, presenting `as`'s certificate (of the CA in use before the rotation). */
    function clientOf<S extends DescService>(service: S, peer: "identity" | "payments", as: Issued) {
      const channel = openChannel(`127.0.0.1:${env.mesh.ports[peer]}`, [], {}, clientSecurity(oldCa.certPem, peer, as));
      channels.push(channel);
      return createServiceClient(service, channel);
    }
    const channels: ReturnType<typeof openChannel>[] = [];
    after(() => channels.forEach((c) => c.close()));
    const user = () => ({ authorization: `Bearer ${alice}` });
    const charge = (reference: string) => ({
      idempotencyKey: randomUUID(),
      amount: 100n,
      currency: "EUR",
      source: "tok_visa",
      reference,
    });

    it("payments charges for an order (a reference) only for orders' certificate, with a user's token; the gateway's is refused", async () => {
      const asOrders = clientOf(PaymentService, "payments", oldPairs.get("orders")!);
      const asGateway = clientOf(PaymentService, "payments", oldPairs.get("gateway")!);
      const made = await asOrders.createPayment(charge("order:424242"), { headers: user(), timeoutMs: 5_000 });
      expect(made.payment?.reference).to.equal("order:424242");
      expect(
        await codeOf(asGateway.createPayment(charge("order:424243"), { headers: user(), timeoutMs: 5_000 })),
      ).to.equal(Code.PermissionDenied);
      // A user's own payment, without a reference, from any workload of the mesh.
      expect(await codeOf(asGateway.createPayment(charge(""), { headers: user(), timeoutMs: 5_000 }))).to.equal("OK");
    });

    it("ResolveIdempotencyKey answers orders' certificate alone — no token needed; content's is refused", async () => {
      const request = { tenantId: "acme", idempotencyKey: randomUUID(), operation: KeyedOperation.CREATE_PAYMENT };
      expect(
        await codeOf(
          clientOf(PaymentService, "payments", oldPairs.get("content")!).resolveIdempotencyKey(request, {
            timeoutMs: 5_000,
          }),
        ),
      ).to.equal(Code.PermissionDenied);
      const settled = await clientOf(PaymentService, "payments", oldPairs.get("orders")!).resolveIdempotencyKey(
        request,
        { timeoutMs: 5_000 },
      );
      expect(settled.outcome.case).to.equal("voided");
    });

    it("a service token works only from its own workload: orders' token over content's certificate is refused", async () => {
      const identity = clientOf(IdentityService, "identity", oldPairs.get("orders")!);
      const { accessToken } = await identity.createServiceToken(
        { clientId: "orders", clientSecret: ORDERS_SECRET },
        { timeoutMs: 5_000 },
      );
      const request = { tenantId: "acme", idempotencyKey: randomUUID(), operation: KeyedOperation.CREATE_PAYMENT };
      const withToken = { headers: { [SERVICE_AUTHORIZATION]: `Bearer ${accessToken}` }, timeoutMs: 5_000 };
      expect(
        await codeOf(
          clientOf(PaymentService, "payments", oldPairs.get("content")!).resolveIdempotencyKey(request, withToken),
        ),
      ).to.equal(Code.Unauthenticated);
      expect(
        await codeOf(
          clientOf(PaymentService, "payments", oldPairs.get("orders")!).resolveIdempotencyKey(request, withToken),
        ),
      ).to.equal("OK");
    });

    it("identity's operator RPC answers the operator's certificate, and not the gateway's", async () => {
      const tenant = {
        tenantId: `tls-${randomUUID().slice(0, 8)}`,
        displayName: "TLS",
        adminEmail: "admin@tls.test",
        adminFullName: "Admin",
        adminPassword: "a-long-enough-password",
      };
      expect(
        await codeOf(
          clientOf(OperatorService, "identity", oldPairs.get("gateway")!).createTenant(tenant, { timeoutMs: 10_000 }),
        ),
      ).to.equal(Code.PermissionDenied);
      const made = await clientOf(OperatorService, "identity", issueFor(oldCa, "operator")).createTenant(tenant, {
        timeoutMs: 10_000,
      });
      expect(made.tenant?.id).to.equal(tenant.tenantId);
    });
  });

  describe("rotation", () => {
    it("rotates the CA and every certificate while requests cross every hop: none fails; then the old certificate is refused", async function () {
      this.timeout(120_000);
      const failures: string[] = [];
      let answered = 0;
      let stop = false;
      /** One request after another until told to stop, each checked. */
      const loop = async (request: () => Promise<{ status: number; text: string; what: string }>) => {
        while (!stop) {
          const res = await request().catch((err: unknown) => ({ status: 0, text: String(err), what: "fetch" }));
          if (res.status >= 200 && res.status < 300) answered++;
          else failures.push(`${res.what}: ${res.status} ${res.text.slice(0, 200)}`);
        }
      };
      const get = (path: string) => async () => ({
        ...(await env.api.get(path, { token: alice })),
        what: `GET ${path}`,
      });
      // An order paid: gateway → orders → content (prices) and → identity (orders' own token) and → payments.
      const payOrder = async () => {
        const order = await env.api.post("/v1/orders", {
          token: alice,
          json: { currency: "EUR", items: [{ sku: "PEN-1", quantity: 1 }] },
        });
        if (order.status !== 201) return { ...order, what: "POST /v1/orders" };
        return {
          ...(await env.api.post(`/v1/orders/${order.json.id}/payment`, {
            token: alice,
            json: { source: "tok_visa" },
          })),
          what: "POST /v1/orders/{id}/payment",
        };
      };
      const loops = [
        loop(get("/v1/tenants/acme/users?limit=1")),
        loop(get("/v1/payments?limit=1")),
        loop(get("/v1/catalog/items?page_size=1")),
        loop(payOrder),
      ];
      const everyone = (files: (p: ServiceName) => { "tls.crt": string; "tls.key": string; "ca.crt": string }) => {
        for (const p of PROCESSES) writeMountedSecret(dirOf(p), files(p));
      };
      const settle = (ms: number) => sleep(ms);
      try {
        await settle(1_000);
        const before = answered;
        expect(before, "requests answered before the rotation").to.be.greaterThan(5);
        // 1. Trust the new CA beside the old one, everywhere.
        everyone((p) => ({
          "tls.crt": oldPairs.get(p)!.certPem,
          "tls.key": oldPairs.get(p)!.keyPem,
          "ca.crt": oldCa.certPem + newCa.certPem,
        }));
        await settle(RELOAD_MS * 5);
        // 2. Every process gets a new key and certificate from the new CA.
        const newPairs = new Map(PROCESSES.map((p) => [p, issueFor(newCa, p)] as const));
        everyone((p) => ({
          "tls.crt": newPairs.get(p)!.certPem,
          "tls.key": newPairs.get(p)!.keyPem,
          "ca.crt": oldCa.certPem + newCa.certPem,
        }));
        await settle(CONNECTION_AGE_MS * 2);
        // 3. The old CA is no longer trusted; connections made since carry only new certificates.
        everyone((p) => ({
          "tls.crt": newPairs.get(p)!.certPem,
          "tls.key": newPairs.get(p)!.keyPem,
          "ca.crt": newCa.certPem,
        }));
        await settle(CONNECTION_AGE_MS * 3);
        expect(answered - before, "requests answered during the rotation").to.be.greaterThan(20);
      } finally {
        stop = true;
        await Promise.all(loops);
      }
      expect(failures, "failed requests").to.deep.equal([]);

      // Every process reloaded its files (three times), without a restart.
      for (const p of PROCESSES) {
        const reloads = env.mesh
          .logsOf(p)
          .join("")
          .split("\n")
          .filter((line) => line.includes("TLS files reloaded")).length;
        expect(reloads, `${p} reloads`).to.be.at.least(3);
        expect(env.mesh.process(p).exitCode, `${p} still running`).to.equal(null);
      }

      // The old certificate is refused now, by every service; the new one is served.
      for (const p of ["identity", "payments", "orders", "content"] as const) {
        const port = env.mesh.ports[p];
        expect(
          await healthCheck(port, clientSecurity(oldCa.certPem + newCa.certPem, p, oldPairs.get("gateway"))),
          `${p}: the gateway's old certificate`,
        ).to.equal(Code.Unavailable);
        expect(
          await healthCheck(port, clientSecurity(newCa.certPem, p, issueFor(newCa, "gateway"))),
          `${p}: a new one`,
        ).to.equal("SERVING");
        // And a client that trusts only the old CA no longer accepts the server.
        expect(
          await healthCheck(port, clientSecurity(oldCa.certPem, p, oldPairs.get("gateway"))),
          `${p}: seen by a client of the old CA`,
        ).to.equal(Code.Unavailable);
      }
    });
  });
});

// Mutual TLS's files (grpc/tls.ts): all three or none; a process starts only with a certificate that
// names it and a key that matches; and files caught in the middle of a change — a new certificate
// beside the old key — are not used: the server keeps serving new connections with the last good
// pair (grpc-js alone would refuse every new connection until the next read).
import { expect } from "chai";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:tls";
import { credentials } from "@grpc/grpc-js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ConfigError, grpcTlsSettings, loadConfig } from "@switchyard/platform/config.js";
import {
  createServiceClient,
  openChannel,
  openTransportSecurity,
  serviceNamedBy,
  type TlsConfig,
} from "@switchyard/platform/grpc";
import { createLogger } from "@switchyard/platform/logger.js";
import { startGrpcServer } from "@switchyard/platform/server.js";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { TestCa, type Issued } from "../../../test/support/pki.js";

const logger = createLogger("test", "silent");

describe("mutual TLS files (GRPC_TLS_*)", function () {
  this.timeout(30_000);
  let dir: string;
  const ca = new TestCa("tls test CA");
  const payments = ca.issue("payments", { uris: ["spiffe://switchyard/payments"] });
  const payments2 = ca.issue("payments", { uris: ["spiffe://switchyard/payments"] });
  const orders = ca.issue("orders", { uris: ["spiffe://switchyard/orders"] });

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "switchyard-tls-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const write = (pair: { certPem: string; keyPem: string }) => {
    writeFileSync(join(dir, "tls.crt"), pair.certPem);
    writeFileSync(join(dir, "tls.key"), pair.keyPem);
    writeFileSync(join(dir, "ca.crt"), ca.certPem);
  };
  const config = (): TlsConfig => ({
    tlsCertFile: join(dir, "tls.crt"),
    tlsKeyFile: join(dir, "tls.key"),
    tlsCaFile: join(dir, "ca.crt"),
    tlsTrustDomain: "switchyard",
    tlsReloadIntervalMs: 100,
  });

  it("are set all three or not at all", () => {
    expect(loadConfig(grpcTlsSettings, {}).tlsCertFile).to.equal(undefined);
    expect(() => loadConfig(grpcTlsSettings, { GRPC_TLS_CERT_FILE: "/x.crt", GRPC_TLS_KEY_FILE: "/x.key" }))
      .to.throw(ConfigError)
      .with.property("message")
      .that.matches(/GRPC_TLS_CA_FILE missing/);
  });

  it("names the service by its one SPIFFE ID in the trust domain", () => {
    expect(serviceNamedBy({ subjectaltname: "URI:spiffe://switchyard/orders, DNS:orders" }, "switchyard")).to.equal(
      "orders",
    );
    expect(serviceNamedBy({ subjectaltname: "URI:spiffe://elsewhere/orders" }, "switchyard")).to.equal(undefined);
    expect(serviceNamedBy({ subjectaltname: "URI:spiffe://switchyard/ns/x/sa/orders" }, "switchyard")).to.equal(
      undefined,
    );
    expect(
      serviceNamedBy(
        { subjectaltname: "URI:spiffe://switchyard/orders, URI:spiffe://switchyard/payments" },
        "switchyard",
      ),
    ).to.equal(undefined);
    expect(serviceNamedBy({ subjectaltname: "DNS:orders" }, "switchyard")).to.equal(undefined);
  });

  it("a process refuses to start with another service's certificate, or a key of another certificate", () => {
    write(orders);
    expect(() => openTransportSecurity(config(), "payments", logger)).to.throw(
      /names "orders", not this service \("payments"/,
    );
    write({ certPem: payments.certPem, keyPem: orders.keyPem });
    expect(() => openTransportSecurity(config(), "payments", logger)).to.throw(/key does not match/);
  });

  it("a certificate changed without its key is not used: new connections are still served with the last good pair, then with the new one once whole", async () => {
    write(payments);
    const tls = openTransportSecurity(config(), "payments", logger)!;
    const server = await startGrpcServer({
      name: "payments",
      host: "127.0.0.1",
      port: 0,
      services: [],
      logger,
      credentials: tls.serverCredentials,
    });
    /** The serial of the certificate the server presents to a new connection, once a health check over it answered. */
    const served = async (): Promise<string> => {
      const channel = openChannel(
        `127.0.0.1:${server.port}`,
        [],
        {},
        {
          credentials: credentials.createSsl(
            Buffer.from(ca.certPem),
            Buffer.from(orders.keyPem),
            Buffer.from(orders.certPem),
            { checkServerIdentity: () => undefined },
          ),
          options: { "grpc.ssl_target_name_override": "payments" },
        },
      );
      try {
        const reply = await createServiceClient(Health, channel).check({}, { timeoutMs: 2_000 });
        expect(reply.status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
      } finally {
        channel.close();
      }
      const socket = connect({
        host: "127.0.0.1",
        port: server.port,
        ca: ca.certPem,
        cert: orders.certPem,
        key: orders.keyPem,
        ALPNProtocols: ["h2"],
        servername: "payments",
        checkServerIdentity: () => undefined,
      });
      await new Promise((resolve, reject) => socket.once("secureConnect", resolve).once("error", reject));
      const serial = socket.getPeerCertificate().serialNumber;
      socket.destroy();
      return serial.toLowerCase();
    };
    const serialOf = (pair: Issued) => new X509Certificate(pair.certPem).serialNumber.toLowerCase();
    try {
      expect(await served()).to.equal(serialOf(payments));
      // Half of a rotation on disk: the new certificate beside the old key.
      writeFileSync(join(dir, "tls.crt"), payments2.certPem);
      await sleep(400);
      expect(await served(), "with a torn pair on disk: the last good one").to.equal(serialOf(payments));
      writeFileSync(join(dir, "tls.key"), payments2.keyPem);
      await sleep(400);
      expect(await served(), "with the new pair whole").to.equal(serialOf(payments2));
    } finally {
      await server.shutdown();
    }
  });
});

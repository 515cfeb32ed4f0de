// Log lines never carry credentials, and the lines about a call carry its request id.
import { expect } from "chai";
import { Writable } from "node:stream";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { callFields, createLogger } from "@switchyard/platform/logger.js";
import { callScopeOf } from "@switchyard/platform/grpc";
import { EchoService } from "@switchyard/platform/echo.js";
import { registration, startGrpcServer } from "@switchyard/platform/server.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc/client.js";

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, stream };
}

describe("logger", () => {
  it("redacts tokens, passwords, secrets, private keys and database URLs wherever they sit", () => {
    const { lines, stream } = capture();
    const logger = createLogger("test", "info", stream);
    logger.info(
      {
        password: "p1-secret",
        token: "tok-secret",
        config: { databaseUrl: "postgres://u:db-secret@h/db", secret: "s-secret", serviceToken: "st-secret" },
        key: { privateKey: "pk-secret", private_key: "pk2-secret" },
        connectionString: "postgres://u:cs-secret@h/db",
        headers: { authorization: "Bearer auth-secret", "service-authorization": "Bearer svc-secret" },
      },
      "hello",
    );
    const line = lines.join("");
    for (const secret of [
      "p1-secret",
      "tok-secret",
      "db-secret",
      "s-secret",
      "st-secret",
      "pk-secret",
      "pk2-secret",
      "cs-secret",
      "auth-secret",
      "svc-secret",
    ]) {
      expect(line, secret).to.not.include(secret);
    }
    expect(line).to.include("[redacted]");
  });

  it("writes the request id of the call a line is about: the server's lines, and a handler's own", async () => {
    const { lines, stream } = capture();
    const logger = createLogger("test", "debug", stream);
    const server = await startGrpcServer({
      name: "logged",
      host: "127.0.0.1",
      port: 0,
      logger,
      services: [
        registration(EchoService, {
          echo(req, ctx) {
            logger.info(callFields(callScopeOf(ctx)), "the handler's own line");
            if (req.message === "fail") throw new ConnectError("boom", Code.Internal);
            return { message: "ok" };
          },
        } as Partial<ServiceImpl<typeof EchoService>> as ServiceImpl<typeof EchoService>),
      ],
    });
    const channel = openChannel(`127.0.0.1:${server.port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      await echo.echo({ message: "ok" }, { headers: { "x-request-id": "req-answered" } });
      await echo.echo({ message: "fail" }, { headers: { "x-request-id": "req-failed" } }).catch(() => undefined);
    } finally {
      channel.close();
      await server.shutdown();
    }
    logger.info("outside");
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; request_id?: string });
    const of = (msg: string) => parsed.filter((l) => l.msg === msg).map((l) => l.request_id);
    expect(of("the handler's own line")).to.deep.equal(["req-answered", "req-failed"]);
    expect(of("rpc answered")).to.deep.equal(["req-answered"]);
    expect(of("rpc failed with an internal error")).to.deep.equal(["req-failed"]);
    expect(of("outside")).to.deep.equal([undefined]);
  });
});

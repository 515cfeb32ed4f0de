// Log lines never carry credentials, and lines written within a call carry its request id.
import { expect } from "chai";
import { Writable } from "node:stream";
import { createLogger } from "@switchyard/platform/logger.js";
import { withCallScope } from "@switchyard/platform/call-deadline.js";

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

  it("writes the request id of the call a line is written in", () => {
    const { lines, stream } = capture();
    const logger = createLogger("test", "info", stream);
    withCallScope({ deadlineAt: undefined, requestId: "req-123" }, () => logger.info("inside"));
    logger.info("outside");
    expect(JSON.parse(lines[0]!).request_id).to.equal("req-123");
    expect(JSON.parse(lines[1]!).request_id).to.equal(undefined);
  });
});

// /rpc's binary request check: one enveloped message (or a unary body) that parses as the method's
// input goes on, its bytes given again; anything else is refused as the caller's error.
import { expect } from "chai";
import { toBinary, create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { encodeEnvelope, type UniversalServerRequest } from "@connectrpc/connect/protocol";
import { ContentService, GetDocumentRequestSchema } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { checkedMessage } from "../../src/rpc/message-checks.js";

const method = ContentService.method.getDocument;
const message = toBinary(GetDocumentRequestSchema, create(GetDocumentRequestSchema, { documentId: "doc_1" }));

function request(contentType: string, body: Uint8Array, headers: Record<string, string> = {}): UniversalServerRequest {
  return {
    httpVersion: "1.1",
    method: "POST",
    url: "http://gateway/rpc/x",
    header: new Headers({ "content-type": contentType, ...headers }),
    body: (async function* () {
      yield body.subarray(0, 3);
      yield body.subarray(3);
    })(),
    signal: new AbortController().signal,
  };
}

async function bytesOf(checked: Awaited<ReturnType<typeof checkedMessage>>): Promise<Buffer> {
  if (!("request" in checked)) throw new Error(`refused: ${checked.refusal.rawMessage}`);
  const chunks: Uint8Array[] = [];
  for await (const chunk of checked.request.body as AsyncIterable<Uint8Array>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const refusalOf = (checked: Awaited<ReturnType<typeof checkedMessage>>) =>
  "refusal" in checked ? { code: checked.refusal.code, message: checked.refusal.rawMessage } : undefined;

describe("rpc: message checks", () => {
  it("passes a valid unary body and one valid enveloped message on, their bytes given again", async () => {
    const unary = await bytesOf(await checkedMessage(request("application/proto", message), method, 1024));
    expect([...unary]).to.deep.equal([...message]);
    const enveloped = encodeEnvelope(0, message);
    for (const type of ["application/connect+proto", "application/grpc-web+proto", "application/grpc-web"]) {
      const bytes = await bytesOf(await checkedMessage(request(type, enveloped), method, 1024));
      expect([...bytes]).to.deep.equal([...enveloped]);
    }
  });

  it("refuses a body that is not exactly one envelope: none, two, or one cut short", async () => {
    const one = encodeEnvelope(0, message);
    for (const body of [
      new Uint8Array(0),
      Buffer.concat([one, one]),
      one.subarray(0, one.length - 1),
      one.subarray(0, 3),
    ]) {
      expect(refusalOf(await checkedMessage(request("application/connect+proto", body), method, 1024))).to.deep.equal({
        code: Code.InvalidArgument,
        message: "the request is not one enveloped message",
      });
    }
  });

  it("refuses a message that is not the method's input, naming it", async () => {
    const refused = refusalOf(
      await checkedMessage(
        request("application/grpc-web+proto", encodeEnvelope(0, Uint8Array.of(0xff, 0xff))),
        method,
        1024,
      ),
    );
    expect(refused?.code).to.equal(Code.InvalidArgument);
    expect(refused?.message).to.match(/^the request is not a valid switchyard\.content\.v1\.GetDocumentRequest: /);
  });

  it("refuses a body past the limit, and leaves compressed, encoded and JSON bodies to connect-node", async () => {
    expect(refusalOf(await checkedMessage(request("application/proto", new Uint8Array(20)), method, 10))).to.deep.equal(
      {
        code: Code.ResourceExhausted,
        message: "the request is larger than 10 bytes",
      },
    );
    const compressed = encodeEnvelope(0b1, Uint8Array.of(1, 2, 3));
    const passed = await bytesOf(await checkedMessage(request("application/connect+proto", compressed), method, 1024));
    expect([...passed]).to.deep.equal([...compressed]);
    const json = request("application/json", Uint8Array.of(0x7b));
    expect(await checkedMessage(json, method, 1024)).to.deep.equal({ request: json });
    const encoded = request("application/proto", Uint8Array.of(0xff), { "content-encoding": "gzip" });
    expect(await checkedMessage(encoded, method, 1024)).to.deep.equal({ request: encoded });
  });
});

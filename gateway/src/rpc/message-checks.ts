// A binary request message checked before the call is dispatched: connect-node reports a message it
// cannot parse as `internal` (its parser serves clients and servers alike), but a malformed request
// is the caller's error — `invalid_argument`. Binary Connect (unary `application/proto`, streaming
// `application/connect+proto`) and gRPC-Web bodies are read (up to the body limit) and parsed once;
// compressed or JSON ones go on unread (connect-node reports JSON it cannot parse as invalid_argument).
import { fromBinary, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  compressedFlag,
  transformSplitEnvelope,
  type EnvelopedMessage,
  type UniversalServerRequest,
} from "@connectrpc/connect/protocol";

/** The request to hand connect-node (its body read, then given again), or why it is refused. */
export type CheckedMessage = { request: UniversalServerRequest } | { refusal: ConnectError };

export async function checkedMessage(
  request: UniversalServerRequest,
  method: DescMethod,
  maxBytes: number,
): Promise<CheckedMessage> {
  const type = (request.header.get("content-type") ?? "").toLowerCase().split(";")[0]!.trim();
  const enveloped =
    type === "application/connect+proto" || type === "application/grpc-web" || type === "application/grpc-web+proto";
  if (
    (type !== "application/proto" && !enveloped) ||
    request.header.get("content-encoding") ||
    !isAsyncIterable(request.body)
  )
    return { request };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes)
      return { refusal: new ConnectError(`the request is larger than ${maxBytes} bytes`, Code.ResourceExhausted) };
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  const read = { request: { ...request, body: once(bytes) } };
  let message: Uint8Array = bytes;
  if (enveloped) {
    const envelope = await oneEnvelope(bytes, maxBytes);
    if (envelope === undefined)
      return { refusal: new ConnectError("the request is not one enveloped message", Code.InvalidArgument) };
    if ((envelope.flags & compressedFlag) !== 0) return read; // connect-node decompresses and reads it
    message = envelope.data;
  }
  try {
    fromBinary(method.input, message);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return {
      refusal: new ConnectError(`the request is not a valid ${method.input.typeName}: ${why}`, Code.InvalidArgument),
    };
  }
  return read;
}

/** The one envelope the body holds; undefined for none, more than one, or one cut short. */
async function oneEnvelope(bytes: Uint8Array, maxBytes: number): Promise<EnvelopedMessage | undefined> {
  const found: EnvelopedMessage[] = [];
  try {
    for await (const envelope of transformSplitEnvelope(maxBytes)(once(bytes))) found.push(envelope);
  } catch {
    return undefined; // cut short, or promising more than the body limit
  }
  return found.length === 1 ? found[0] : undefined;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

// google.rpc.Status in the `grpc-status-details-bin` trailer: how an ErrorInfo reason crosses
// the wire between grpc-js peers (and any other gRPC implementation).
import { Metadata, status as GrpcStatus, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { StatusSchema } from "@switchyard/gen/google/rpc/status_pb.js";
import { errorInfoOf } from "../errors.js";

const DETAILS_KEY = "grpc-status-details-bin";
const TYPE_URL_PREFIX = "type.googleapis.com/";

/**
 * gRPC's retry pushback (gRFC A6): a negative value tells the caller's channel not to retry. Sent with
 * every LOAD_SHED refusal — this process's own, or a peer's it passes on — so that an overloaded
 * service receives no more calls than were sent to it: a retry would only add to the load it sheds.
 */
const RETRY_PUSHBACK_KEY = "grpc-retry-pushback-ms";
const DO_NOT_RETRY = "-1";

/** The status a server sends for an error thrown by a handler. Unknown errors become INTERNAL. */
export function statusFromError(err: unknown): Partial<StatusObject> {
  const ce = err instanceof ConnectError ? err : undefined;
  if (!ce) return { code: GrpcStatus.INTERNAL, details: "internal error", metadata: new Metadata() };
  const metadata = new Metadata();
  const details = ce.details.flatMap((d) => ("desc" in d ? [anyPack(d.desc, create(d.desc, d.value))] : []));
  if (details.length > 0) {
    const status = create(StatusSchema, { code: ce.code, message: ce.rawMessage, details });
    metadata.set(DETAILS_KEY, Buffer.from(toBinary(StatusSchema, status)));
  }
  if (errorInfoOf(ce)?.reason === "LOAD_SHED") metadata.set(RETRY_PUSHBACK_KEY, DO_NOT_RETRY);
  return { code: ce.code as number, details: ce.rawMessage, metadata };
}

/** A ConnectError from a grpc-js client error, with the peer's ErrorInfo (if any) readable by findDetails. */
export function errorFromStatus(err: ServiceError | StatusObject): ConnectError {
  const code = (err.code as number as Code) || Code.Unknown;
  const ce = new ConnectError(err.details, code, undefined);
  const raw = err.metadata?.get(DETAILS_KEY)[0];
  if (raw instanceof Buffer) {
    try {
      const status = fromBinary(StatusSchema, raw);
      ce.details = status.details.map((any) => ({
        type: any.typeUrl.startsWith(TYPE_URL_PREFIX) ? any.typeUrl.slice(TYPE_URL_PREFIX.length) : any.typeUrl,
        value: any.value,
      }));
    } catch {
      // A peer sent undecodable details: keep code and message, drop the details.
    }
  }
  return ce;
}

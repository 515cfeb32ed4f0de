// One /v<N> request on its way through the API pipeline (api.ts): what the shared stages know of it
// (EdgeCall), and what /v1's own stages add — its route and version, its checked input, its deadline
// and cancellation. Made once per request; each stage reads and fills it.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestCancellation } from "../runtime/cancellation.js";
import type { RequestRecord } from "../runtime/observability.js";
import type { CompiledOperation } from "../runtime/openapi.js";
import type { ResponseHeaders } from "../runtime/respond.js";
import type { BodyLine } from "../runtime/route.js";
import type { BoundRoute } from "../routes/table.js";
import { EdgeCall } from "./edge-call.js";

/** One request of the API as the edge hands it over (dispatch.ts). */
export interface ApiRequest {
  req: IncomingMessage;
  res: ServerResponse;
  record: RequestRecord;
  /** What its answer carries so far (its request id). */
  headers: ResponseHeaders;
  /** The client's address (runtime/client-address.ts). */
  address: string;
  pathname: string;
  /** The query, without its `?`. */
  search: string;
}

export class ApiExchange extends EdgeCall {
  declare readonly record: RequestRecord;
  // Set in the constructor only (`declare`: not defined empty first, then set — as parameter properties were).
  declare readonly req: IncomingMessage;
  declare readonly res: ServerResponse;
  declare readonly pathname: string;
  declare readonly search: string;
  declare readonly method: string;
  /** route: the operation that answers (of the negotiated version), and the path's parameters. */
  operation!: CompiledOperation;
  pathParams!: Record<string, string>;
  /** route: the version the path names, and the one negotiated (the representation read and answered). */
  pathMajor = 0;
  version = 0;
  /** route: the handler and its upstream; undefined for what the edge answers itself (the OpenAPI document). */
  route: BoundRoute | undefined = undefined;
  /** The service named in a 5xx message. */
  upstream = "upstream";
  /** input: path, query and header parameters, checked against the document. */
  params!: Record<string, unknown>;
  /** input: the checked body, and its lines when the operation takes it line by line. */
  body: unknown = undefined;
  lines: BodyLine[] | undefined = undefined;
  /** deadline: when the upstream call chain must be done (ms since the epoch). */
  deadlineAt = 0;
  /** call: the cancellation of everything started upstream; set when the upstream call starts. */
  cancellation: RequestCancellation | undefined = undefined;
  /** The client went away before the answer was complete. */
  gone = false;

  constructor({ req, res, record, headers, address, pathname, search }: ApiRequest) {
    super(address, record, headers);
    this.req = req;
    this.res = res;
    this.pathname = pathname;
    this.search = search;
    this.method = req.method ?? "GET";
  }
}

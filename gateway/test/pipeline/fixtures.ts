// What the pipeline's stage tests share: a caller, a verifier that knows a few tokens, an access record,
// and a request's exchange without a socket.
import { Readable } from "node:stream";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import type { Caller } from "@switchyard/platform/caller.js";
import { fail } from "@switchyard/platform/errors.js";
import type { RequestRecord } from "../../src/runtime/observability.js";
import { ApiExchange } from "../../src/pipeline/api-exchange.js";

export const ADDRESS = "192.0.2.44";

export const caller = (tenantId = "acme", userId = 7n, token = "t-alice"): Caller => ({
  tenantId,
  userId,
  role: "member",
  sessionId: "s1",
  expiresAt: Math.floor(Date.now() / 1000) + 600,
  token,
});

/** A verifier that knows `known` at once, verifies `valid` (with a promise) and refuses anything else. */
export function fakeVerifier(known: Record<string, Caller> = {}, valid: Record<string, Caller> = {}) {
  const verified: string[] = [];
  const verifier = {
    knownAuthorization: (header: string | undefined) => (header === undefined ? undefined : known[header]),
    async verifyAuthorization(header: string | undefined): Promise<Caller> {
      verified.push(header ?? "");
      const found = header === undefined ? undefined : (known[header] ?? valid[header]);
      if (!found) throw fail("UNAUTHENTICATED", "the token is not valid");
      return found;
    },
    watch: () => () => {},
  } as unknown as TokenVerifier;
  return { verifier, verified };
}

export function record(): RequestRecord {
  return {
    requestId: "req-1",
    route: undefined,
    quotaKind: undefined,
    eventStream: false,
    cache: undefined,
    run: (work, ...args) => work(...args),
    onClose: undefined,
  };
}

/** A request with these headers (and body, read as a stream), answered nowhere: for stages that read the request only. */
export function request(headers: IncomingHttpHeaders = {}, body?: string, method = "GET"): IncomingMessage {
  const req = Readable.from(body === undefined ? [] : [Buffer.from(body)]) as unknown as IncomingMessage;
  Object.assign(req, { headers, method, url: "/", socket: { remoteAddress: ADDRESS } });
  return req;
}

export function exchange(
  path: string,
  options: { method?: string; headers?: IncomingHttpHeaders; body?: string } = {},
): ApiExchange {
  const [pathname = "", search = ""] = path.split("?");
  const method = options.method ?? "GET";
  const req = request(options.headers, options.body, method);
  return new ApiExchange({
    req,
    res: {} as ServerResponse,
    record: record(),
    headers: { "x-request-id": "req-1" },
    address: ADDRESS,
    pathname,
    search,
  });
}

// A failure without a catalogued reason is the transport's or the channel's (grpc-js's own deadline,
// an unreachable peer, an answer past the receive limit, a reset stream), never the request's: /v1
// answers it with a 5xx and the gateway's own message, /rpc with the catalogue's gRPC code and the
// same message — never a 4xx, never 429, never the library's text (addresses, ports, sizes).
import { expect } from "chai";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCatalogue, errorInfoOf, fail } from "@switchyard/platform/errors.js";
import { toHttpError, toRpcError } from "../src/runtime/errors.js";

/** What grpc-js says, client side, when a call fails on its own channel. */
const GRPC_JS_TEXT: [Code, string][] = [
  [Code.ResourceExhausted, "Received message larger than max (4331505 vs 4194304)"],
  [Code.ResourceExhausted, "Bandwidth exhausted or memory limit exceeded"],
  [Code.DeadlineExceeded, "Deadline exceeded after 0.000s,remote_addr=127.0.0.1:50054"],
  [Code.Unavailable, "No connection established. Last error: connect ECONNREFUSED 127.0.0.1:50054"],
  [Code.Internal, "Received RST_STREAM with code 2 triggered by internal client error: Protocol error"],
  [Code.Unknown, "Server sent an unrecognized status"],
  [Code.PermissionDenied, "Protocol not secure enough"],
  [Code.Unimplemented, "The server does not implement the method /switchyard.content.v1.ContentService/ListPosts"],
];
const LEAKS =
  /remote_addr|127\.0\.0\.1|\d{4,}|Deadline exceeded after|larger than max|RST_STREAM|ECONNREFUSED|switchyard\.content/;

describe("transport failures reach no client", () => {
  describe("/v1 (toHttpError)", () => {
    it("answers an answer past the channel's receive limit with 502 and the gateway's message — not 429 with grpc-js's", () => {
      const http = toHttpError(
        new ConnectError("Received message larger than max (4331505 vs 4194304)", Code.ResourceExhausted),
        "content",
      );
      expect([http.status, http.code, http.message]).to.deep.equal([
        502,
        "UPSTREAM_UNAVAILABLE",
        "the content service gave an answer that could not be used",
      ]);
      expect(http.headers).to.not.have.property("retry-after");
    });

    it("answers grpc-js's own deadline with 504 and the gateway's message", () => {
      const http = toHttpError(
        new ConnectError("Deadline exceeded after 0.000s,remote_addr=127.0.0.1:50054", Code.DeadlineExceeded),
        "content",
      );
      expect([http.status, http.code, http.message]).to.deep.equal([
        504,
        "DEADLINE_EXCEEDED",
        "the content service did not answer in time; the operation may have completed",
      ]);
    });

    it("never answers a failure without a catalogued reason with a 4xx (but a cancelled request's 499) nor with its text", () => {
      for (const code of Object.values(Code).filter((c): c is Code => typeof c === "number" && c !== Code.Canceled)) {
        const http = toHttpError(new ConnectError("remote_addr=127.0.0.1:50054 said no", code), "content");
        expect(http.status, Code[code]).to.be.within(500, 504);
        expect(http.message, Code[code]).to.not.match(LEAKS);
      }
      for (const [code, text] of GRPC_JS_TEXT)
        expect(toHttpError(new ConnectError(text, code), "content").body, text).to.not.match(LEAKS);
      const cancelled = toHttpError(new ConnectError("Cancelled on client", Code.Canceled));
      expect([cancelled.status, cancelled.message]).to.deep.equal([499, "the request was cancelled"]);
    });

    it("maps a catalogued reason as before: its status, and the service's message below 500", () => {
      expect([
        toHttpError(fail("RATE_LIMITED", "slow down")).status,
        toHttpError(fail("LOGIN_THROTTLED", "wait")).status,
      ]).to.deep.equal([429, 429]);
      const invalid = toHttpError(fail("INVALID_CURSOR", "the cursor is malformed"));
      expect([invalid.status, invalid.message]).to.deep.equal([400, "the cursor is malformed"]);
      const shed = toHttpError(fail("LOAD_SHED", "event loop 612 ms behind"), "orders");
      expect([shed.status, shed.message, shed.headers["retry-after"]]).to.deep.equal([
        503,
        "the orders service is shedding load; retry after the Retry-After delay",
        "1",
      ]);
    });

    it("says a database outage is one, not a shed: 503 STORE_UNAVAILABLE with Retry-After, in the store's words", () => {
      const down = toHttpError(fail("STORE_UNAVAILABLE", "connect ECONNREFUSED 10.0.0.7:5432"), "payments");
      expect([down.status, down.code, down.message, down.headers["retry-after"]]).to.deep.equal([
        503,
        "STORE_UNAVAILABLE",
        "the payments service's database is unavailable; retry after the Retry-After delay",
        "1",
      ]);
      expect(down.body).to.not.match(/shedding|ECONNREFUSED|10\.0\.0\.7/);
    });
  });

  describe("/rpc (toRpcError)", () => {
    it("passes a catalogued refusal of the request through as the service raised it", () => {
      const refusal = fail("PRICE_CHANGED", "the price of BOOK-1 is 1500 EUR", {
        sku: "BOOK-1",
        unit_price: "1500",
        currency: "EUR",
      });
      expect(toRpcError(refusal, "orders")).to.equal(refusal);
    });

    it("gives a transport failure the catalogue's code for its reason and /v1's message: never resource_exhausted, never grpc-js's text", () => {
      const expected: Record<string, [Code, string]> = {
        ResourceExhausted: [Code.Unavailable, "UPSTREAM_UNAVAILABLE"],
        DeadlineExceeded: [Code.DeadlineExceeded, "DEADLINE_EXCEEDED"],
        Unavailable: [Code.Unavailable, "UPSTREAM_UNAVAILABLE"],
        Internal: [Code.Internal, "INTERNAL"],
        Unknown: [Code.Unavailable, "UPSTREAM_UNAVAILABLE"],
        PermissionDenied: [Code.Unavailable, "UPSTREAM_UNAVAILABLE"],
        Unimplemented: [Code.Unavailable, "UPSTREAM_UNAVAILABLE"],
      };
      for (const [code, text] of GRPC_JS_TEXT) {
        const rpc = toRpcError(new ConnectError(text, code), "content");
        const [connectCode, reason] = expected[Code[code]]!;
        expect([Code[rpc.code], errorInfoOf(rpc)?.reason], text).to.deep.equal([Code[connectCode], reason]);
        expect(rpc.code).to.equal(errorCatalogue[reason as keyof typeof errorCatalogue].code);
        expect(rpc.rawMessage, text).to.equal(toHttpError(new ConnectError(text, code), "content").message);
        expect(rpc.rawMessage, text).to.not.match(LEAKS);
      }
    });

    it("says connect-node's own deadline in the same words as grpc-js's", () => {
      const ours = toRpcError(new ConnectError("the operation timed out", Code.DeadlineExceeded), "content");
      const theirs = toRpcError(
        new ConnectError("Deadline exceeded after 0.001s,remote_addr=127.0.0.1:50054", Code.DeadlineExceeded),
        "content",
      );
      expect([ours.code, ours.rawMessage]).to.deep.equal([theirs.code, theirs.rawMessage]);
    });

    it("gives a catalogued 5xx the gateway's message and Retry-After; a cancellation stays one; a bug is internal", () => {
      const shed = toRpcError(fail("LOAD_SHED", "the service is overloaded (event loop 612 ms behind)"), "orders");
      expect([
        Code[shed.code],
        shed.rawMessage,
        shed.metadata.get("retry-after"),
        errorInfoOf(shed)?.reason,
      ]).to.deep.equal([
        "Unavailable",
        "the orders service is shedding load; retry after the Retry-After delay",
        "1",
        "LOAD_SHED",
      ]);
      expect(Code[toRpcError(new ConnectError("Cancelled on client", Code.Canceled), "orders").code]).to.equal(
        "Canceled",
      );
      const bug = toRpcError(new TypeError("cannot read properties of undefined (reading 'id')"), "orders");
      expect([Code[bug.code], bug.rawMessage]).to.deep.equal(["Internal", "internal error"]);
    });
  });
});

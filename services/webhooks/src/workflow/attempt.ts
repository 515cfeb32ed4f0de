// One attempt at delivering a message: a POST that follows no redirect (a 3xx is an answer like any
// other that is not 2xx), reads at most 64 KiB of the answer (keeping the first 1 KiB), and ends
// after 10 s whatever the receiver does. It connects only to an address the destination policy
// allows, checked where the address is chosen: the connection's own name lookup is ours, so the
// address connected to is the one checked — a name that resolves inward since it was registered
// (DNS rebinding) gains nothing; an address written in the URL is checked before any connection.
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIPv6, type LookupFunction } from "node:net";
import { addressRefusal, literalAddressOf, type DestinationPolicy } from "../domain/destinations.js";
import type { ResolveName } from "./destination-check.js";

export interface AttemptLimits {
  timeoutMs: number;
  /** The most of an answer read; the connection is closed past it. */
  maxAnswerBytes: number;
  /** How much of the answer is kept to show (delivery lists). */
  excerptBytes: number;
}

export const ATTEMPT_LIMITS: AttemptLimits = { timeoutMs: 10_000, maxAnswerBytes: 64 * 1024, excerptBytes: 1024 };

export interface AttemptOutcome {
  /** A 2xx answer came. */
  delivered: boolean;
  /** The answer's status; undefined when none came (refused, unreachable, timed out before it). */
  status: number | undefined;
  latencyMs: number;
  /** The first bytes of the answer (at most excerptBytes). */
  excerpt: string;
  /** Why there was no answer, or why the reading stopped; undefined for a whole answer. */
  error: string | undefined;
}

export interface Delivery {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface AttemptDeps {
  destinations: DestinationPolicy;
  resolve: ResolveName;
  limits?: AttemptLimits;
}

class DestinationRefused extends Error {}

/** A lookup that answers only with an address the policy allows, and refuses the name when any it resolves to is not. */
function checkedLookup(policy: DestinationPolicy, resolve: ResolveName): LookupFunction {
  return (hostname, options, callback) => {
    void resolve(hostname).then((addresses) => {
      const refused = addresses.map((a) => addressRefusal(a, policy)).find((r) => r !== undefined);
      if (addresses.length === 0 || refused !== undefined) {
        const why = refused === undefined ? "does not resolve" : `resolves to a ${refused} address`;
        callback(new DestinationRefused(`destination refused: ${hostname} ${why}`), "", 0);
        return;
      }
      const address = addresses[0]!;
      const family = isIPv6(address) ? 6 : 4;
      if (options.all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    });
  };
}

/** Why the destination is refused before any connection (its scheme, or the address its URL names), if it is. */
function refusalBeforeConnecting(url: URL, policy: DestinationPolicy): string | undefined {
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowPlainHttp))
    return `destination refused: ${url.protocol} is not allowed`;
  const literal = literalAddressOf(url.hostname);
  const refusal = literal === undefined ? undefined : addressRefusal(literal, policy);
  return refusal === undefined ? undefined : `destination refused: a ${refusal} address`;
}

export function attemptDelivery(delivery: Delivery, deps: AttemptDeps): Promise<AttemptOutcome> {
  const limits = deps.limits ?? ATTEMPT_LIMITS;
  const started = performance.now();
  const url = new URL(delivery.url);
  const elapsed = () => Math.round(performance.now() - started);
  const refused = refusalBeforeConnecting(url, deps.destinations);
  if (refused)
    return Promise.resolve({ delivered: false, status: undefined, latencyMs: 0, excerpt: "", error: refused });

  return new Promise((resolve) => {
    let response: IncomingMessage | undefined;
    const chunks: Buffer[] = [];
    let read = 0;
    let done = false;
    const finish = (error: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      request.destroy();
      response?.destroy();
      const status = response?.statusCode;
      resolve({
        delivered: status !== undefined && status >= 200 && status < 300,
        status,
        latencyMs: elapsed(),
        excerpt: Buffer.concat(chunks).subarray(0, limits.excerptBytes).toString("utf8"),
        error,
      });
    };
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const request: ClientRequest = send(url, {
      method: "POST",
      // A connection of its own: nothing of one endpoint's attempt outlives it.
      agent: false,
      lookup: checkedLookup(deps.destinations, deps.resolve),
      headers: {
        ...delivery.headers,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(delivery.body),
        "user-agent": "Switchyard-Webhooks/1",
      },
    });
    const timer = setTimeout(() => finish(`timed out after ${limits.timeoutMs} ms`), limits.timeoutMs);
    request.on("error", (err) => finish(err instanceof DestinationRefused ? err.message : `no answer: ${err.message}`));
    request.on("response", (res) => {
      response = res;
      res.on("data", (chunk: Buffer) => {
        // Kept up to the excerpt, counted up to the limit: past it the answer is cut off.
        if (read < limits.excerptBytes) chunks.push(chunk);
        read += chunk.length;
        if (read > limits.maxAnswerBytes) finish(`answer cut off after ${limits.maxAnswerBytes} bytes`);
      });
      res.on("end", () => finish(undefined));
      res.on("error", (err) => finish(`answer broken off: ${err.message}`));
    });
    request.end(delivery.body);
  });
}

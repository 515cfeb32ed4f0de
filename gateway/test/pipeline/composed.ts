// What the tests of the composed edge share (api.test.ts, edge-lifecycle.test.ts): a concurrency
// limit whose places say what they teach, the edge's policy over test parts, /v1's pipeline over the
// real v1 document with the routes a test gives and no upstreams, and a real HTTP server for it.
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { apiPipeline, type ServeApi } from "../../src/pipeline/api.js";
import { answerStage } from "../../src/pipeline/answer.js";
import { callStage } from "../../src/pipeline/call.js";
import type { EdgeStage } from "../../src/pipeline/edge-lifecycle.js";
import { edgePolicy, type EdgePolicy } from "../../src/pipeline/edge-policy.js";
import { bodyStage } from "../../src/pipeline/input.js";
import { routeStage } from "../../src/pipeline/route.js";
import { AdaptiveConcurrencyLimit, type Release } from "../../src/runtime/concurrency-limit.js";
import type { FailureLog } from "../../src/runtime/failure-log.js";
import type { LiveFanout } from "../../src/runtime/live-fanout.js";
import { loadApiDocument, servedApiPath } from "../../src/runtime/openapi.js";
import type { RateLimiter } from "../../src/runtime/rate-limit.js";
import { Router } from "../../src/runtime/router.js";
import { StreamSlots } from "../../src/runtime/streams.js";
import { deprecatedOperations, publishedVersions, type DeprecatedRouteUsage } from "../../src/runtime/versions.js";
import type { BoundRoute } from "../../src/routes/table.js";
import type { Upstreams } from "../../src/upstreams.js";

/** A fixed limit of `places` requests at a time, each released place saying whether it taught the limit. */
export function sampledLimit(places: number, onSample: (sample: boolean) => void): AdaptiveConcurrencyLimit {
  const concurrency = new AdaptiveConcurrencyLimit({ initialLimit: places, minLimit: places, maxLimit: places });
  const acquire = concurrency.tryAcquire.bind(concurrency);
  concurrency.tryAcquire = (priority): Release | undefined => {
    const release = acquire(priority);
    return release && ((sample) => (onSample(sample), release(sample)));
  };
  return concurrency;
}

export interface TestPolicyParts {
  verifier: TokenVerifier;
  concurrency: AdaptiveConcurrencyLimit;
  rateLimiter: RateLimiter;
  /** The quota per 10 minutes, as its refusal states it. */
  rateLimit: number;
  onShed?: () => void;
  stages?: readonly EdgeStage[];
  priorities?: boolean;
}

/** The edge's policy over test parts: one live stream per caller, a 1 s deadline (2 s at most). */
export function testPolicy({
  verifier,
  concurrency,
  rateLimiter,
  rateLimit,
  onShed,
  stages,
  priorities,
}: TestPolicyParts): EdgePolicy {
  return edgePolicy({
    verifier,
    ownCredentials: new ServiceCredentials(async () => ({ token: "gateway-token", expiresInSeconds: 600 })),
    concurrency,
    rateLimiter,
    rateLimit,
    rateWindowSeconds: 600,
    streamSlots: new StreamSlots(1),
    maxStreamsPerCaller: 1,
    deadlineMs: 1_000,
    maxDeadlineMs: 2_000,
    onShed: onShed ?? (() => {}),
    ...(stages ? { stages } : {}),
    ...(priorities === undefined ? {} : { priorities }),
  });
}

export interface TestApiParts {
  policy: EdgePolicy;
  verifier: TokenVerifier;
  routes: ReadonlyMap<string, BoundRoute>;
  failures: FailureLog;
  usage: DeprecatedRouteUsage;
}

/** /v1's pipeline over the real v1 document (its only version) and `routes`, with no upstreams. */
export function testApiPipeline({ policy, verifier, routes, failures, usage }: TestApiParts): ServeApi {
  const versions = publishedVersions(new Date("2027-08-23T00:00:00Z")).filter((v) => v.major === 1);
  const document = loadApiDocument(servedApiPath(1));
  return apiPipeline({
    policy,
    routeAndVersion: routeStage({
      router: new Router(document.operations),
      routes,
      publishedMajors: [1],
      deprecations: deprecatedOperations(versions, () => new Map()),
      deprecatedUsage: usage,
    }),
    readBody: bodyStage(1_024),
    callRoute: callStage({
      upstreams: {} as Upstreams,
      fanout: {} as LiveFanout,
      edgeCache: undefined,
      upstreamMetadata: policy.upstreamMetadata,
    }),
    answers: answerStage({ verifier, heartbeatMs: 60_000, failures }),
    documents: new Map([[1, document.document]]),
  });
}

/** A real HTTP server for `handle` on a free port: its base URL, and its close (open connections cut). */
export async function listening(handle: RequestListener): Promise<{ base: string; close(): Promise<void> }> {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Until every place in the limit is back: a place goes back when its response closes, just after the client has read it. */
export async function placesBack(concurrency: AdaptiveConcurrencyLimit): Promise<void> {
  for (let i = 0; i < 50 && concurrency.inflight > 0; i++) await new Promise((r) => setTimeout(r, 5));
}

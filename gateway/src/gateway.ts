// The public edge, composed once at start: the upstream channels, the token verifier, the limit, the
// quotas, the edge cache — then the pipeline over them (pipeline/: the shared stages, /v<N>'s and the
// browser proxy's), the HTTP server that hands it every request (server.ts), and the order they stop in.
import type { Server } from "node:http";
import type { Logger } from "@switchyard/platform/logger.js";
import { GATEWAY_SERVICE } from "@switchyard/platform/caller.js";
import { serviceCredentialsFromIdentity } from "@switchyard/platform/service-credentials.js";
import { openTransportSecurity } from "@switchyard/platform/grpc";
import { verifierFromIdentity } from "@switchyard/platform/identity-keys.js";
import { Faults } from "@switchyard/platform/faults.js";
import { gatewayShed, reportGatewayGauges, startProcessMetrics } from "@switchyard/platform/metrics.js";
import { startTracing } from "@switchyard/platform/tracing.js";
import { loadApiDocument, representationsOf, servedApiPath, type ApiDocument } from "./runtime/openapi.js";
import { DeprecatedRouteUsage, deprecatedOperations, publishedVersions } from "./runtime/versions.js";
import { EdgeCache } from "./runtime/edge-cache.js";
import { CacheLease } from "./runtime/cache-lease.js";
import { CacheFollower } from "./runtime/cache-follower.js";
import { StreamSlots } from "./runtime/streams.js";
import { LiveFanout } from "./runtime/live-fanout.js";
import { corsPolicy } from "./runtime/cors.js";
import { createRateLimiter } from "./runtime/rate-limit.js";
import { AdaptiveConcurrencyLimit } from "./runtime/concurrency-limit.js";
import { FailureLog } from "./runtime/failure-log.js";
import { edgeError } from "./runtime/errors.js";
import { Router } from "./runtime/router.js";
import { bindRoutes } from "./routes/table.js";
import { openUpstreams, type Upstreams } from "./upstreams.js";
import { createDocsSite } from "./docs.js";
import { rpcProxy } from "./rpc/front.js";
import { edgePolicy } from "./pipeline/edge-policy.js";
import { routeStage } from "./pipeline/route.js";
import { bodyStage } from "./pipeline/input.js";
import { callStage } from "./pipeline/call.js";
import { answerStage } from "./pipeline/answer.js";
import { apiPipeline } from "./pipeline/api.js";
import { dispatchStage } from "./dispatch.js";
import { Readiness } from "./readiness.js";
import { listenEdge } from "./server.js";
import type { GatewayConfig } from "./settings.js";

// The package's face (@switchyard/gateway): its settings and how to start it.
export { gatewayConfigFrom, gatewaySettings, type GatewayConfig } from "./settings.js";

export interface RunningGateway {
  readonly port: number;
  readonly server: Server;
  stop(): Promise<void>;
}

export async function startGateway(config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  // Observability: spans when the OTEL_* variables ask for them, metrics at /metrics, an access log at info.
  const stopTracing = await startTracing("gateway");
  startProcessMetrics("gateway");
  // One document per published version, each driving its own routes; one router over all of them.
  const versions = publishedVersions(config.v1SunsetAt);
  const apis = new Map<number, ApiDocument>(versions.map((v) => [v.major, loadApiDocument(servedApiPath(v.major))]));
  // Over every published document at once: an operation of one version alone (v2's webhook endpoints) has its handler too.
  const routes = bindRoutes([...apis.values()].flatMap((a) => a.operations));
  const router = new Router([...apis.values()].flatMap((a) => a.operations));
  const deprecations = deprecatedOperations(versions, (major) => representationsOf(apis.get(major)!));
  const deprecatedUsage = new DeprecatedRouteUsage(logger, config.deprecationLogIntervalMs);
  // The API reference (/docs): a page per published version, rendering the documents loaded above.
  const docs = createDocsSite(
    versions.map((v) => ({ version: `v${v.major}`, status: v.status, document: apis.get(v.major)!.document })),
  );
  // Mutual TLS to the services when GRPC_TLS_* are set: the gateway's certificate names it ("gateway").
  const tls = openTransportSecurity(config, GATEWAY_SERVICE, logger);
  const upstreams: Upstreams = openUpstreams(
    {
      identity: config.identityAddress,
      payments: config.paymentsAddress,
      orders: config.ordersAddress,
      content: config.contentAddress,
      webhooks: config.webhooksAddress,
    },
    tls,
  );
  // The gateway verifies tokens itself (for quotas and early 401s), with identity's keys and revocations.
  const { verifier, follower } = await verifierFromIdentity(upstreams.channels.identity, logger);
  // Its own token vouches for the client addresses it forwards to identity (upstream-headers.ts).
  const ownCredentials = serviceCredentialsFromIdentity(
    upstreams.channels.identity,
    GATEWAY_SERVICE,
    config.serviceSecret,
  );
  const concurrency = new AdaptiveConcurrencyLimit({
    initialLimit: config.concurrencyInitial,
    minLimit: config.concurrencyMin,
    maxLimit: Math.max(config.concurrencyMin, config.concurrencyMax),
    buffer: config.concurrencyBufferPercent / 100,
    minRttIntervalMs: config.concurrencyProbeIntervalMs,
  });
  const rateLimiter = createRateLimiter({
    limit: config.rateLimit,
    windowSeconds: config.rateWindowSeconds,
    redisUrl: config.redisUrl,
    keyPrefix: config.rateLimitPrefix,
  });
  const readiness = new Readiness(upstreams.channels);
  const failures = new FailureLog(logger);
  const streamSlots = new StreamSlots(config.maxStreamsPerCaller);
  const fanout = new LiveFanout(logger, { outageMs: config.sseUpstreamOutageMs });
  reportGatewayGauges({
    limit: () => concurrency.sheddingLimit,
    shedding: () => (concurrency.shedding ? 1 : 0),
    backlogAllowance: () => concurrency.backlogAllowance,
    inflight: () => concurrency.inflight,
    minRttMs: () => concurrency.minRtt,
    liveStreams: () => streamSlots.size,
    sharedLiveStreams: () => fanout.size,
  });
  // The edge cache: answers from memory only under a lease from content, dropped by its change stream.
  const cacheLease = new CacheLease();
  const edgeCache = config.edgeCache
    ? new EdgeCache({ maxEntries: config.edgeCacheEntries, maxBytes: config.edgeCacheMb * 1024 * 1024 }, () =>
        cacheLease.serves(),
      )
    : undefined;
  const faults = { faults: new Faults(config.faults, logger) };
  const cacheFollower =
    edgeCache &&
    new CacheFollower(
      {
        content: upstreams.content,
        serviceToken: () => ownCredentials.token(),
        cache: edgeCache,
        lease: cacheLease,
        logger,
      },
      faults,
    );
  cacheFollower?.start();

  // The edge's policy — identify, admit, quota, stream slot, deadline, upstream metadata — once, for
  // /v<N> and /rpc alike: the same verifier, limit, quotas and stream slots.
  const policy = edgePolicy({
    verifier,
    ownCredentials,
    concurrency,
    rateLimiter,
    rateLimit: config.rateLimit,
    rateWindowSeconds: config.rateWindowSeconds,
    streamSlots,
    maxStreamsPerCaller: config.maxStreamsPerCaller,
    deadlineMs: config.deadlineMs,
    maxDeadlineMs: config.maxDeadlineMs,
    onShed: (priority) => gatewayShed.inc({ priority }),
    priorities: config.priorities,
  });
  const serveApi = apiPipeline({
    policy,
    routeAndVersion: routeStage({
      router,
      routes,
      publishedMajors: versions.map((v) => v.major),
      deprecations,
      deprecatedUsage,
    }),
    readBody: bodyStage(config.maxBodyBytes),
    callRoute: callStage({ upstreams, fanout, edgeCache, upstreamMetadata: policy.upstreamMetadata }),
    answers: answerStage({ verifier, heartbeatMs: config.heartbeatMs, failures }),
    documents: new Map([...apis].map(([major, api]) => [major, api.document])),
  });
  // The browser proxy (/rpc/…): the same channels and policy, its own route and representation.
  const rpc = rpcProxy({ upstreams, policy, maxBodyBytes: config.maxBodyBytes });
  const dispatch = dispatchStage({
    versions,
    docs,
    cors: corsPolicy(config.corsOrigins ?? []),
    rpc,
    serveApi,
    answerReadiness: (res, headers) => readiness.answer(res, headers),
    trustedProxyHops: config.trustedProxyHops,
  });

  const edge = await listenEdge({
    host: config.host,
    port: config.port,
    listenFd: config.listenFd,
    trustedProxyHops: config.trustedProxyHops,
    logger,
    dispatch,
    router,
  });

  let stopping: Promise<void> | undefined;
  async function stop(): Promise<void> {
    readiness.drain();
    // The edge cache gives its lease up first: no write in content waits for a gateway that is leaving.
    const cacheStopped = cacheFollower?.stop();
    // Live feeds end at once, telling their clients to reconnect: open, they would hold the drain for its whole length.
    fanout.endAll(edgeError("UPSTREAM_UNAVAILABLE", "the gateway is shutting down; reconnect"));
    await edge.close(config.drainTimeoutMs);
    failures.stop();
    deprecatedUsage.stop();
    follower.stop();
    await cacheStopped;
    upstreams.close();
    await rateLimiter.close();
    await stopTracing();
  }
  return { port: edge.port, server: edge.server, stop: () => (stopping ??= stop()) };
}

// The edge's policy, composed once at start and shared by /v1 (api.ts) and /rpc (rpc/front.ts): the
// same stages, over the same verifier, limit, quotas and stream slots, in the same order —
// identify → admit → quota → (shed) → stream slot → deadline → upstream metadata — and one lifecycle
// (edge-lifecycle.ts) that runs them and gives back what a call holds. Each front says the refusals
// in its own protocol.
import type { Priority } from "@switchyard/platform/priority.js";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import type { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import type { AdaptiveConcurrencyLimit } from "../runtime/concurrency-limit.js";
import type { CompiledOperation } from "../runtime/openapi.js";
import { requestPriority, type RequestShape } from "../runtime/priority.js";
import type { RateLimiter } from "../runtime/rate-limit.js";
import type { StreamSlots } from "../runtime/streams.js";
import { admissionStage } from "./admit.js";
import { deadlineStage, type Deadline } from "./deadline.js";
import { edgeLifecycle, type EdgeLifecycle, type EdgeStage } from "./edge-lifecycle.js";
import { identifyStage, type Identify } from "./identify.js";
import { quotaStage } from "./quota.js";
import { streamSlotStage } from "./stream-slot.js";
import { upstreamMetadataStage, type UpstreamMetadata } from "./upstream-metadata.js";

export interface EdgePolicyOptions {
  verifier: TokenVerifier;
  /** The gateway's own token, which vouches for the client addresses it forwards. */
  ownCredentials: ServiceCredentials;
  concurrency: AdaptiveConcurrencyLimit;
  rateLimiter: RateLimiter;
  /** The quota (requests per window), as the refusal states it. */
  rateLimit: number;
  rateWindowSeconds: number;
  streamSlots: StreamSlots;
  maxStreamsPerCaller: number;
  /** The deadline of a request that names none, and the most any may ask for. */
  deadlineMs: number;
  maxDeadlineMs: number;
  /** Counted when the concurrency limit sheds. */
  onShed(priority: Priority): void;
  /** Stages every admitted call also enters, on both fronts, after the shed and before its stream slot. */
  stages?: readonly EdgeStage[];
  /** Shed and call by each operation's priority (default true; false: every call is default). */
  priorities?: boolean;
}

export interface EdgePolicy extends EdgeLifecycle {
  /** What a request of this operation and shape is shed as, and sent upstream with (runtime/priority.ts). */
  priority(operation: Pick<CompiledOperation, "priority">, shape: RequestShape): Priority;
  identify: Identify;
  deadline: Deadline;
  upstreamMetadata: UpstreamMetadata;
}

export function edgePolicy(options: EdgePolicyOptions): EdgePolicy {
  const quota = quotaStage(options.rateLimiter, options.rateLimit, options.rateWindowSeconds);
  return {
    ...edgeLifecycle({
      admission: admissionStage(options.concurrency, quota, options.onShed),
      quota,
      takeStreamSlot: streamSlotStage(options.streamSlots, options.maxStreamsPerCaller),
      added: options.stages ?? [],
    }),
    priority: options.priorities === false ? () => "default" : requestPriority,
    identify: identifyStage(options.verifier),
    deadline: deadlineStage(options.deadlineMs, options.maxDeadlineMs),
    upstreamMetadata: upstreamMetadataStage(options.ownCredentials),
  };
}

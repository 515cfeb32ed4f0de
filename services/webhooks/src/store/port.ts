// What the webhooks service needs from storage. Secrets cross this port in the clear; the adapter
// seals them at rest.
import type { IdempotentOutcome, KeyedRequest } from "@switchyard/platform/store";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { EventType } from "../domain/endpoints.js";

export interface EndpointRecord {
  id: string;
  tenantId: string;
  url: string;
  eventTypes: EventType[];
  enabled: boolean;
  disabledReason: string;
  createdAt: Date;
  updatedAt: Date;
  /** While a rotation runs: when the secret before the current one stops signing. */
  previousSecretExpiresAt: Date | undefined;
}

export interface NewEndpoint {
  url: string;
  eventTypes: EventType[];
  secret: string;
}

/** An endpoint just made, with its secret: what its creation answers (and replays) once. */
export interface CreatedEndpoint {
  endpoint: EndpointRecord;
  secret: string;
}

export interface EndpointChange {
  url?: string;
  eventTypes?: EventType[];
  enabled?: boolean;
}

/** The secrets that sign an endpoint's deliveries now: the current one, and the one before while it still signs. */
export interface SigningSecrets {
  current: string;
  previous: string | undefined;
}

export interface WebhooksStore {
  /** Creates the endpoint once per (tenant, principal, key); a retry gets the first answer back, replayed. */
  createEndpoint(
    tenantId: string,
    idempotency: KeyedRequest<CreatedEndpoint>,
    endpoint: NewEndpoint,
  ): Promise<IdempotentOutcome<CreatedEndpoint>>;
  getEndpoint(tenantId: string, id: string): Promise<EndpointRecord | undefined>;
  /** Newest first. */
  listEndpoints(tenantId: string, after: Keyset | undefined, limit: number): Promise<EndpointRecord[]>;
  /** Undefined when there is no such endpoint. Enabling one clears why it was disabled. */
  updateEndpoint(tenantId: string, id: string, change: EndpointChange): Promise<EndpointRecord | undefined>;
  /** False when there was no such endpoint. */
  deleteEndpoint(tenantId: string, id: string): Promise<boolean>;
  /** `secret` becomes current; the current one signs beside it for `previousValidMs`. */
  rotateSecret(
    tenantId: string,
    id: string,
    secret: string,
    previousValidMs: number,
  ): Promise<EndpointRecord | undefined>;
  signingSecrets(tenantId: string, id: string): Promise<SigningSecrets | undefined>;
}

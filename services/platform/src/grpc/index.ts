// `@switchyard/platform/grpc`: calling and serving gRPC — typed clients over grpc-js channels, the
// handler context (the verified caller, metadata), the interceptors a service declares (authentication
// by its call policy, its Idempotency-Key rules), status details, health.
export * from "./client.js";
export { RETRY_BUDGET } from "./retry-budget.js";
export { warnIfCallTablesMissing } from "./call-tables.js";
export * from "./handler-context.js";
export * from "./authentication.js";
export {
  authentication,
  idempotencyKeys,
  type IdempotencyKeyRules,
  type Interceptor,
  type ServerCall,
  type ServiceInterceptor,
} from "./interceptors/index.js";
export {
  ANYONE,
  USERS,
  certificateIdentity,
  type CallPolicy,
  type MethodAccess,
  type PeerIdentity,
} from "./call-policy.js";
export { codecOf, methodPath } from "./service-adapter.js";
export { errorFromStatus, statusFromError } from "./status-details.js";
export { HealthStatus, ServingStatus } from "./health.js";
export {
  channelSecurityFromFiles,
  openTransportSecurity,
  serviceNamedBy,
  spiffeId,
  tlsFilesOf,
  type ChannelSecurity,
  type TlsConfig,
  type TlsFiles,
  type TransportSecurity,
} from "./tls.js";

// Internal records → proto messages, field by field.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EndpointSchema, type Endpoint } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import type { EndpointRecord } from "./store/port.js";

export function endpointToProto(e: EndpointRecord): Endpoint {
  return create(EndpointSchema, {
    id: e.id,
    url: e.url,
    eventTypes: e.eventTypes,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    createTime: timestampFromDate(e.createdAt),
    updateTime: timestampFromDate(e.updatedAt),
    ...(e.previousSecretExpiresAt ? { previousSecretExpireTime: timestampFromDate(e.previousSecretExpiresAt) } : {}),
  });
}

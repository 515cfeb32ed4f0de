// The browser proxy's route: what a page may call under /rpc/<package.Service>/<Method>, and which
// upstream answers it. Only the services' public API is here — nothing operator-only or internal (key
// sets, revocations, service tokens): anything else is `unimplemented`, as if it did not exist.
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import type { UpstreamName } from "../upstreams.js";

export const RPC_PREFIX = "/rpc";

/**
 * What a page may call, by service: every method of the service's public API. Left out, and so
 * `unimplemented`: identity's GetJwks, WatchRevocations and CreateServiceToken (internal),
 * payments' ResolveIdempotencyKey (orders' own), and the operator and echo services entirely.
 */
export const BROWSER_METHODS: Readonly<Record<string, readonly string[]>> = {
  [IdentityService.typeName]: [
    "CreateSession",
    "GetSession",
    "DeleteSession",
    "GetTenant",
    "ListUsers",
    "CreateUser",
    "GetUser",
    "DeleteUser",
  ],
  [PaymentService.typeName]: [
    "CreatePayment",
    "GetPayment",
    "ListPayments",
    "CreateRefund",
    "GetRefund",
    "ListRefunds",
  ],
  [OrderService.typeName]: [
    "CreateOrder",
    "GetOrder",
    "UpdateOrder",
    "ListUserOrders",
    "PayOrder",
    "ShipOrder",
    "CancelOrder",
    "AddItem",
    "ListItems",
    "AddDiscount",
    "ListDiscounts",
    "TrackOrders",
  ],
  [ContentService.typeName]: [
    "CreateDocument",
    "GetDocument",
    "UpdateDocument",
    "CreatePost",
    "GetPost",
    "ListPosts",
    "WatchPosts",
    "ListCatalogItems",
    "BatchGetCatalogItems",
    "ImportItems",
    "CreateImportJob",
    "GetImportJob",
  ],
};

/** Each service a page may reach, by the gateway's name for its upstream (whose client it calls). */
const BROWSER_SERVICES: readonly (readonly [DescService, UpstreamName])[] = [
  [IdentityService, "identity"],
  [PaymentService, "payments"],
  [OrderService, "orders"],
  [ContentService, "content"],
];

/** A method a page may call, and the upstream that answers it. */
export interface AllowedMethod {
  service: DescService;
  method: DescMethod;
  upstream: UpstreamName;
}

/** The methods a page may call, by their path under /rpc. */
export const ALLOWED_METHODS: ReadonlyMap<string, AllowedMethod> = new Map(
  BROWSER_SERVICES.flatMap(([service, upstream]) =>
    service.methods
      .filter((method) => BROWSER_METHODS[service.typeName]!.includes(method.name))
      .map((method): [string, AllowedMethod] => [
        `${RPC_PREFIX}/${service.typeName}/${method.name}`,
        { service, method, upstream },
      ]),
  ),
);

/** The route a path counts under in metrics and the access log: a method's path, or one name for all others (bounded). */
export function rpcRouteOf(path: string): string {
  return ALLOWED_METHODS.has(path) ? path : `${RPC_PREFIX}/{other}`;
}

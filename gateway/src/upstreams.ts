// One long-lived grpc-js channel per upstream service, opened at start and reused by every request.
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { createServiceClient, openChannel, type Client, type TransportSecurity } from "@switchyard/platform/grpc";

export interface UpstreamAddresses {
  identity: string;
  payments: string;
  orders: string;
  content: string;
  webhooks: string;
}

/** An upstream service by the gateway's name for it. */
export type UpstreamName = keyof UpstreamAddresses;

export interface Upstreams {
  identity: Client<typeof IdentityService>;
  payments: Client<typeof PaymentService>;
  orders: Client<typeof OrderService>;
  content: Client<typeof ContentService>;
  webhooks: Client<typeof WebhookService>;
  /** The channels by service name (health checks, the token key source). */
  channels: Record<keyof UpstreamAddresses, ReturnType<typeof openChannel>>;
  close(): void;
}

/** The channels to the services, over mutual TLS when `tls` is given (each expects its service's certificate). */
export function openUpstreams(addresses: UpstreamAddresses, tls?: TransportSecurity): Upstreams {
  const identityChannel = openChannel(addresses.identity, [IdentityService], {}, tls?.forPeer("identity"));
  const paymentsChannel = openChannel(addresses.payments, [PaymentService], {}, tls?.forPeer("payments"));
  const ordersChannel = openChannel(addresses.orders, [OrderService], {}, tls?.forPeer("orders"));
  const contentChannel = openChannel(addresses.content, [ContentService], {}, tls?.forPeer("content"));
  const webhooksChannel = openChannel(addresses.webhooks, [WebhookService], {}, tls?.forPeer("webhooks"));
  return {
    identity: createServiceClient(IdentityService, identityChannel),
    payments: createServiceClient(PaymentService, paymentsChannel),
    orders: createServiceClient(OrderService, ordersChannel),
    content: createServiceClient(ContentService, contentChannel),
    webhooks: createServiceClient(WebhookService, webhooksChannel),
    channels: {
      identity: identityChannel,
      payments: paymentsChannel,
      orders: ordersChannel,
      content: contentChannel,
      webhooks: webhooksChannel,
    },
    close() {
      identityChannel.close();
      paymentsChannel.close();
      ordersChannel.close();
      contentChannel.close();
      webhooksChannel.close();
    },
  };
}

// /v2/webhook-endpoints…: partners' webhook endpoints, translated to WebhookService calls. Who may is
// the service's to decide (a tenant's admins).
import { created, type RouteContext, type RouteGroup } from "../runtime/route.js";
import { cursorParam, listResult, pageSizeParam } from "../runtime/pagination.js";
import {
  webhookDeliveryJson,
  webhookEndpointJson,
  webhookEndpointWithSecretJson,
} from "../representations/webhooks.js";

interface EndpointBody {
  url: string;
  event_types: string[];
}
interface EndpointChangeBody {
  url?: string;
  event_types?: string[];
  enabled?: boolean;
}

const endpointId = (ctx: RouteContext) => ctx.params.endpoint_id as string;

export const webhookRoutes: RouteGroup = {
  upstream: "webhooks",
  handlers: {
    async createWebhookEndpoint({ params, body, upstreams, callOptions, base }) {
      const input = body as EndpointBody;
      const res = await upstreams.webhooks.createEndpoint(
        { idempotencyKey: params["idempotency-key"] as string, url: input.url, eventTypes: input.event_types },
        callOptions(),
      );
      const endpoint = res.endpoint!;
      return created(
        webhookEndpointWithSecretJson(endpoint, res.secret),
        `${base}/webhook-endpoints/${endpoint.id}`,
        res.replayed,
      );
    },

    async listWebhookEndpoints({ params, upstreams, callOptions, path }) {
      const res = await upstreams.webhooks.listEndpoints(
        { pageSize: pageSizeParam(params.limit), pageToken: cursorParam(params.cursor) },
        callOptions(),
      );
      return listResult(path, params.limit, res.endpoints.map(webhookEndpointJson), res.nextPageToken);
    },

    async getWebhookEndpoint(ctx) {
      const { endpoint } = await ctx.upstreams.webhooks.getEndpoint({ endpointId: endpointId(ctx) }, ctx.callOptions());
      return { status: 200, body: webhookEndpointJson(endpoint!) };
    },

    async updateWebhookEndpoint(ctx) {
      const change = ctx.body as EndpointChangeBody;
      const { endpoint } = await ctx.upstreams.webhooks.updateEndpoint(
        {
          endpointId: endpointId(ctx),
          url: change.url,
          eventTypes: change.event_types === undefined ? undefined : { values: change.event_types },
          enabled: change.enabled,
        },
        ctx.callOptions(),
      );
      return { status: 200, body: webhookEndpointJson(endpoint!) };
    },

    async deleteWebhookEndpoint(ctx) {
      await ctx.upstreams.webhooks.deleteEndpoint({ endpointId: endpointId(ctx) }, ctx.callOptions());
      return { status: 204 };
    },

    async sendWebhookTestEvent(ctx) {
      const { delivery } = await ctx.upstreams.webhooks.sendTestEvent(
        { endpointId: endpointId(ctx) },
        ctx.callOptions(),
      );
      // Accepted: the delivery is made by the workers, as every other (its attempts show in the list).
      return { status: 202, body: webhookDeliveryJson(delivery!) };
    },

    async redeliverWebhookDelivery(ctx) {
      const { delivery } = await ctx.upstreams.webhooks.redeliver(
        { endpointId: endpointId(ctx), deliveryId: ctx.params.delivery_id as string },
        ctx.callOptions(),
      );
      return { status: 202, body: webhookDeliveryJson(delivery!) };
    },

    async listWebhookEndpointDeliveries(ctx) {
      const res = await ctx.upstreams.webhooks.listEndpointDeliveries(
        {
          endpointId: endpointId(ctx),
          pageSize: pageSizeParam(ctx.params.limit),
          pageToken: cursorParam(ctx.params.cursor),
        },
        ctx.callOptions(),
      );
      return listResult(ctx.path, ctx.params.limit, res.deliveries.map(webhookDeliveryJson), res.nextPageToken);
    },

    async rotateWebhookEndpointSecret(ctx) {
      const res = await ctx.upstreams.webhooks.rotateEndpointSecret({ endpointId: endpointId(ctx) }, ctx.callOptions());
      return { status: 200, body: webhookEndpointWithSecretJson(res.endpoint!, res.secret) };
    },
  },
};

// What a set of NetworkPolicies allows, by the Kubernetes rules: a pod selected by no policy of a
// direction is open in that direction; one selected by any is closed but for what some rule of those
// policies allows (rules add up, nothing subtracts). A connection needs the source's egress and the
// destination's ingress. Pods are modelled by namespace and labels, outside addresses by IP.
import ipaddr from "ipaddr.js";

export type Labels = Record<string, string>;
export interface Pod {
  namespace: string;
  labels: Labels;
}
export interface Address {
  ip: string;
}
export type Endpoint = Pod | Address;

interface Selector {
  matchLabels?: Labels;
  matchExpressions?: { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }[];
}
interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface PortRule {
  protocol?: string;
  port?: number | string;
  endPort?: number;
}
interface Rule {
  from?: Peer[];
  to?: Peer[];
  ports?: PortRule[];
}
export interface NetworkPolicy {
  kind: "NetworkPolicy";
  metadata: { name: string; namespace?: string };
  spec: { podSelector: Selector; policyTypes?: ("Ingress" | "Egress")[]; ingress?: Rule[]; egress?: Rule[] };
}

export function selectorMatches(selector: Selector | undefined, labels: Labels): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    const ok =
      e.operator === "In"
        ? has && (e.values ?? []).includes(labels[e.key]!)
        : e.operator === "NotIn"
          ? !has || !(e.values ?? []).includes(labels[e.key]!)
          : e.operator === "Exists"
            ? has
            : e.operator === "DoesNotExist"
              ? !has
              : (() => {
                  throw new Error(`selector operator ${String(e.operator)}`);
                })();
    if (!ok) return false;
  }
  return true;
}

const isPod = (e: Endpoint): e is Pod => "labels" in e;

function ipToNumber(ip: string): number {
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
    throw new Error(`not an IPv4 address: ${ip}`);
  return parts.reduce((n, p) => n * 256 + p, 0);
}

/** Whether an address (IPv4 or IPv6) lies in a CIDR of the same family. */
export function inCidr(ip: string, cidr: string): boolean {
  const address = ipaddr.parse(ip);
  const [network, bits] = ipaddr.parseCIDR(cidr);
  return address.kind() === network.kind() && address.match(network, bits);
}

/** The first address of a CIDR past its network address (an address inside it). */
export function addressIn(cidr: string): string {
  const [base = ""] = cidr.split("/");
  const n = ipToNumber(base) + 1;
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

function peerMatches(peer: Peer, policyNamespace: string, endpoint: Endpoint): boolean {
  if (peer.ipBlock) {
    if (isPod(endpoint)) return false; // pod addresses are not what these rules name
    return inCidr(endpoint.ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((c) => inCidr(endpoint.ip, c));
  }
  if (!isPod(endpoint)) return false;
  const namespaceOk = peer.namespaceSelector
    ? selectorMatches(peer.namespaceSelector, { "kubernetes.io/metadata.name": endpoint.namespace })
    : endpoint.namespace === policyNamespace;
  return namespaceOk && selectorMatches(peer.podSelector, endpoint.labels);
}

function portMatches(rules: PortRule[] | undefined, port: number, protocol: string): boolean {
  if (!rules || rules.length === 0) return true;
  return rules.some((r) => {
    if ((r.protocol ?? "TCP") !== protocol) return false;
    if (r.port === undefined) return true;
    if (typeof r.port === "string")
      throw new Error(`named port ${r.port} in a NetworkPolicy: resolve it or use the number`);
    return r.endPort === undefined ? r.port === port : port >= r.port && port <= r.endPort;
  });
}

function types(p: NetworkPolicy): ("Ingress" | "Egress")[] {
  return p.spec.policyTypes ?? (p.spec.egress ? ["Ingress", "Egress"] : ["Ingress"]);
}

function directionAllows(
  policies: NetworkPolicy[],
  direction: "Ingress" | "Egress",
  subject: Pod,
  peer: Endpoint,
  port: number,
  protocol: string,
  defaultNamespace: string,
): boolean {
  const selecting = policies.filter(
    (p) =>
      (p.metadata.namespace ?? defaultNamespace) === subject.namespace &&
      types(p).includes(direction) &&
      selectorMatches(p.spec.podSelector, subject.labels),
  );
  if (selecting.length === 0) return true;
  return selecting.some((p) =>
    ((direction === "Ingress" ? p.spec.ingress : p.spec.egress) ?? []).some((rule) => {
      const peers = direction === "Ingress" ? rule.from : rule.to;
      const peerOk =
        !peers ||
        peers.length === 0 ||
        peers.some((x) => peerMatches(x, p.metadata.namespace ?? defaultNamespace, peer));
      return peerOk && portMatches(rule.ports, port, protocol);
    }),
  );
}

/** Whether `from` may open a connection to `to` on the port (both directions' policies agree). */
export function allows(
  policies: NetworkPolicy[],
  from: Endpoint,
  to: Endpoint,
  port: number,
  protocol = "TCP",
  defaultNamespace = "default",
): boolean {
  const egressOk = !isPod(from) || directionAllows(policies, "Egress", from, to, port, protocol, defaultNamespace);
  const ingressOk = !isPod(to) || directionAllows(policies, "Ingress", to, from, port, protocol, defaultNamespace);
  return egressOk && ingressOk;
}

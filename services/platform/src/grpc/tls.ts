// Mutual TLS on the internal gRPC network, when GRPC_TLS_* name the files (config.ts, grpcTlsSettings).
// Every server demands a client certificate that chains to the CA; every client checks that the server
// presents the SPIFFE ID of the service it meant to call (spiffe://<trust domain>/<service>, a URI SAN)
// — the name checked is that ID, not a DNS name, which differs with the address form (dns:///identity,
// a static ipv4: list). The files are read again every GRPC_TLS_RELOAD_INTERVAL_MS by grpc-js's own
// FileWatcherCertificateProvider, and a changed set is used for every new connection (grpc-js's
// certificate-provider credentials swap the server's and the channels' secure contexts), so a
// certificate renewed in place (cert-manager, a kubelet-mounted Secret) needs no restart. What grpc-js
// would take as it is read is checked first (VerifiedCertificates): a key that does not match its
// certificate — the cert read before a rotation swapped the files, the key after — or a certificate
// that does not name this service is ignored, and the last good set stays in use; grpc-js would have
// refused every new connection until the next read.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import type { PeerCertificate } from "node:tls";
import {
  credentials as channelCredentials,
  experimental,
  type ChannelCredentials,
  type ChannelOptions,
  type ServerCredentials,
} from "@grpc/grpc-js";
import type { Logger } from "../logger.js";

type CertificateProvider = experimental.CertificateProvider;
type IdentityUpdate = experimental.IdentityCertificateUpdate;
type CaUpdate = experimental.CaCertificateUpdate;
type IdentityListener = experimental.IdentityCertificateUpdateListener;
type CaListener = experimental.CaCertificateUpdateListener;

/** The TLS settings of a process (config.ts, grpcTlsSettings). */
export interface TlsConfig {
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  tlsCaFile?: string | undefined;
  tlsTrustDomain: string;
  tlsReloadIntervalMs: number;
}

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** A service's SPIFFE ID in the trust domain. */
export const spiffeId = (trustDomain: string, service: string): string => `spiffe://${trustDomain}/${service}`;

/** The URI SANs of a certificate (Node's `subjectaltname`: "URI:spiffe://…, DNS:…"). */
function uriSans(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  return subjectAltName
    .split(/,\s*/)
    .filter((entry) => entry.startsWith("URI:"))
    .map((entry) => entry.slice(4));
}

/**
 * The service a certificate names in the trust domain (its one URI SAN spiffe://<domain>/<service>),
 * or undefined: none, another domain's, a longer path, or more than one (a certificate names one workload).
 */
export function serviceNamedBy(cert: { subjectaltname?: string | undefined }, trustDomain: string): string | undefined {
  const prefix = `spiffe://${trustDomain}/`;
  const ids = uriSans(cert.subjectaltname).filter((uri) => uri.startsWith("spiffe://"));
  if (ids.length !== 1 || !ids[0]!.startsWith(prefix)) return undefined;
  const service = ids[0]!.slice(prefix.length);
  return /^[a-z][a-z0-9-]{0,62}$/.test(service) ? service : undefined;
}

/** Client side: the check of the server's certificate, for the service the channel calls. */
function serverIdentityCheck(trustDomain: string, peer: string) {
  return (_host: string, cert: PeerCertificate): Error | undefined => {
    const named = serviceNamedBy(cert, trustDomain);
    return named === peer
      ? undefined
      : new Error(
          `the server's certificate names ${named === undefined ? "no service of trust domain " + trustDomain : `"${named}"`}, not "${peer}"`,
        );
  };
}

/** The certificates of a PEM bundle. */
function certificatesOf(pem: Buffer): X509Certificate[] {
  const blocks = pem.toString("utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => new X509Certificate(block));
}

/** What is wrong with a certificate and key for `service`, or undefined. */
function identityProblem(update: IdentityUpdate, trustDomain: string, service: string): string | undefined {
  try {
    const [cert] = certificatesOf(update.certificate);
    if (!cert) return "the certificate file holds no certificate";
    if (!cert.checkPrivateKey(createPrivateKey(update.privateKey))) return "the key does not match the certificate";
    const named = serviceNamedBy({ subjectaltname: cert.subjectAltName }, trustDomain);
    if (named !== service)
      return `the certificate names ${named === undefined ? `no service of trust domain ${trustDomain}` : `"${named}"`}, not this service ("${service}", ${spiffeId(trustDomain, service)})`;
    return undefined;
  } catch (err) {
    return `unreadable: ${(err as Error).message}`;
  }
}

function caProblem(update: CaUpdate): string | undefined {
  try {
    return certificatesOf(update.caCertificate).length === 0 ? "the CA file holds no certificate" : undefined;
  } catch (err) {
    return `unreadable: ${(err as Error).message}`;
  }
}

/** A summary of the certificate in use, for the log. */
function describe(update: IdentityUpdate, ca: CaUpdate) {
  const cert = certificatesOf(update.certificate)[0]!;
  return {
    subject: cert.subjectAltName,
    serial: cert.serialNumber,
    not_after: new Date(cert.validTo).toISOString(),
    cas: certificatesOf(ca.caCertificate).length,
  };
}

/** Whose certificate it must be (a service of a trust domain), and how often its files are read again. */
interface CertificateOwner {
  trustDomain: string;
  service: string;
  reloadIntervalMs: number;
}

/**
 * grpc-js's FileWatcherCertificateProvider, passing on only what is whole and this service's: a
 * certificate with its own key that names this service, a CA file with certificates — each only when
 * it changed. One per process, shared by its server and every channel.
 */
class VerifiedCertificates implements CertificateProvider {
  private identity: IdentityUpdate | undefined;
  private ca: CaUpdate | undefined;
  private readonly identityListeners = new Set<IdentityListener>();
  private readonly caListeners = new Set<CaListener>();
  private readonly files: experimental.FileWatcherCertificateProvider;
  private watching = false;
  /** The last set refused, so a bad set is logged once, not at every read. */
  private lastRefused: string | undefined;

  private readonly onIdentity = (update: IdentityUpdate | null) => this.take(update, this.ca);
  private readonly onCa = (update: CaUpdate | null) => this.take(this.identity, update);

  private readonly trustDomain: string;
  private readonly service: string;

  constructor(
    private readonly paths: TlsFiles,
    owner: CertificateOwner,
    private readonly logger: Logger,
  ) {
    this.trustDomain = owner.trustDomain;
    this.service = owner.service;
    this.files = new experimental.FileWatcherCertificateProvider({
      certificateFile: paths.certFile,
      privateKeyFile: paths.keyFile,
      caCertificateFile: paths.caFile,
      refreshIntervalMs: owner.reloadIntervalMs,
    });
  }

  /** Reads the files once, now: a process does not start with a set it could not use. */
  loadNow(): void {
    let identity: IdentityUpdate;
    let ca: CaUpdate;
    try {
      identity = { certificate: readFileSync(this.paths.certFile), privateKey: readFileSync(this.paths.keyFile) };
      ca = { caCertificate: readFileSync(this.paths.caFile) };
    } catch (err) {
      throw new Error(`GRPC_TLS_*: ${(err as Error).message}`);
    }
    const problem = identityProblem(identity, this.trustDomain, this.service) ?? caProblem(ca);
    if (problem) throw new Error(`GRPC_TLS_CERT_FILE, GRPC_TLS_KEY_FILE, GRPC_TLS_CA_FILE: ${problem}`);
    this.identity = identity;
    this.ca = ca;
    this.logger.info({ tls: describe(identity, ca) }, "mutual TLS on: certificate loaded");
  }

  /** A read of the files (the watcher sends the pair and the CA apart, the CA second): kept when whole and new. */
  private take(identity: IdentityUpdate | null | undefined, ca: CaUpdate | null | undefined): void {
    if (!identity || !ca) return; // a file missing for a moment (being replaced): keep what works
    const sameIdentity =
      this.identity !== undefined &&
      identity.certificate.equals(this.identity.certificate) &&
      identity.privateKey.equals(this.identity.privateKey);
    const sameCa = this.ca !== undefined && ca.caCertificate.equals(this.ca.caCertificate);
    if (sameIdentity && sameCa) return;
    const problem =
      (sameIdentity ? undefined : identityProblem(identity, this.trustDomain, this.service)) ??
      (sameCa ? undefined : caProblem(ca));
    if (problem) {
      const fingerprint = `${problem}|${identity.certificate.length}|${ca.caCertificate.length}`;
      if (fingerprint !== this.lastRefused)
        this.logger.warn(
          { problem },
          "TLS files changed but are not usable yet: the previous certificate stays in use",
        );
      this.lastRefused = fingerprint;
      return;
    }
    this.lastRefused = undefined;
    if (!sameIdentity) {
      this.identity = identity;
      for (const listener of this.identityListeners) listener(identity);
    }
    if (!sameCa) {
      this.ca = ca;
      for (const listener of this.caListeners) listener(ca);
    }
    this.logger.info({ tls: describe(identity, ca) }, "TLS files reloaded: new connections use them");
  }

  private watch(): void {
    if (this.watching) return;
    this.watching = true;
    this.files.addIdentityCertificateListener(this.onIdentity);
    this.files.addCaCertificateListener(this.onCa);
  }

  private unwatchIfUnused(): void {
    if (!this.watching || this.identityListeners.size + this.caListeners.size > 0) return;
    this.watching = false;
    this.files.removeIdentityCertificateListener(this.onIdentity);
    this.files.removeCaCertificateListener(this.onCa);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    this.watch();
    if (this.identity) process.nextTick(listener, this.identity);
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
    this.unwatchIfUnused();
  }

  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    this.watch();
    if (this.ca) process.nextTick(listener, this.ca);
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
    this.unwatchIfUnused();
  }
}

/** How a channel to one service is secured: its credentials and the options that go with them. */
export interface ChannelSecurity {
  credentials: ChannelCredentials;
  options: ChannelOptions;
}

/** A process's side of mutual TLS: credentials for its server and for its channels to each peer. */
export interface TransportSecurity {
  readonly trustDomain: string;
  /** The server's credentials: a client certificate from the CA is required. */
  readonly serverCredentials: ServerCredentials;
  /** A channel's to `peer` (a service name): the server must present spiffe://<domain>/<peer>. */
  forPeer(peer: string): ChannelSecurity;
}

/** The files of a TLS config, when all three are set (the settings refuse one or two alone). */
export function tlsFilesOf(config: Pick<TlsConfig, "tlsCertFile" | "tlsKeyFile" | "tlsCaFile">): TlsFiles | undefined {
  const { tlsCertFile: certFile, tlsKeyFile: keyFile, tlsCaFile: caFile } = config;
  return certFile && keyFile && caFile ? { certFile, keyFile, caFile } : undefined;
}

/**
 * Mutual TLS for the process of `service` (its certificate must name it), or undefined when the
 * settings leave it off. Throws when the files cannot be used.
 */
export function openTransportSecurity(
  config: TlsConfig,
  service: string,
  logger: Logger,
): TransportSecurity | undefined {
  const files = tlsFilesOf(config);
  if (!files) return undefined;
  const owner = { trustDomain: config.tlsTrustDomain, service, reloadIntervalMs: config.tlsReloadIntervalMs };
  const certificates = new VerifiedCertificates(files, owner, logger);
  certificates.loadNow();
  // The same provider for both (grpc-js takes the CA from one and the pair from the other).
  const serverCredentials = experimental.createCertificateProviderServerCredentials(certificates, certificates, true);
  const byPeer = new Map<string, ChannelSecurity>();
  return {
    trustDomain: config.tlsTrustDomain,
    serverCredentials,
    forPeer(peer) {
      let security = byPeer.get(peer);
      if (!security) {
        security = {
          credentials: experimental.createCertificateProviderChannelCredentials(certificates, certificates, {
            checkServerIdentity: serverIdentityCheck(config.tlsTrustDomain, peer),
          }),
          // The name sent in SNI and handed to the check above: the service, whatever the address.
          options: { "grpc.ssl_target_name_override": peer },
        };
        byPeer.set(peer, security);
      }
      return security;
    },
  };
}

/**
 * A channel's security from files read once (a short-lived client: the mesh launcher's health checks,
 * a test's probe), for calling `peer`.
 */
export function channelSecurityFromFiles(files: TlsFiles, trustDomain: string, peer: string): ChannelSecurity {
  return {
    credentials: channelCredentials.createSsl(
      readFileSync(files.caFile),
      readFileSync(files.keyFile),
      readFileSync(files.certFile),
      { checkServerIdentity: serverIdentityCheck(trustDomain, peer) },
    ),
    options: { "grpc.ssl_target_name_override": peer },
  };
}

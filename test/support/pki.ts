// A certificate authority for tests of mutual TLS: CAs and the services' certificates (SPIFFE URI SANs),
// made in the test (node-forge signs, node:crypto makes the keys), and written the way the kubelet
// mounts a Secret — files that are symbolic links through `..data` into a directory of one version,
// replaced at once by renaming a new `..data` over the old — so a rotation in a test is the one
// cert-manager and the kubelet make in a cluster.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import forge from "node-forge";

export interface Issued {
  certPem: string;
  keyPem: string;
}

const DAY_MS = 86_400_000;

function rsaKeyPair(): {
  forgePublic: forge.pki.rsa.PublicKey;
  forgePrivate: forge.pki.rsa.PrivateKey;
  keyPem: string;
} {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  return {
    forgePublic: forge.pki.publicKeyFromPem(publicKey),
    forgePrivate: forge.pki.privateKeyFromPem(privateKey),
    keyPem: privateKey,
  };
}

function serialNumber(): string {
  // Positive (leading bit clear), 16 bytes, unique per certificate.
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString("hex");
}

export interface LeafOptions {
  /** URI SANs (spiffe://…). */
  uris?: string[];
  dnsNames?: string[];
  ips?: string[];
  /** Valid from now for this long (default a day). */
  validMs?: number;
}

/** A self-signed CA that issues leaf certificates for servers and clients. */
export class TestCa {
  readonly certPem: string;
  private readonly cert: forge.pki.Certificate;
  private readonly key: forge.pki.rsa.PrivateKey;

  constructor(readonly name: string) {
    const keys = rsaKeyPair();
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.forgePublic;
    cert.serialNumber = serialNumber();
    cert.validity.notBefore = new Date(Date.now() - 60_000);
    cert.validity.notAfter = new Date(Date.now() + 30 * DAY_MS);
    const subject = [{ name: "commonName", value: name }];
    cert.setSubject(subject);
    cert.setIssuer(subject);
    cert.setExtensions([
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
      { name: "subjectKeyIdentifier" },
    ]);
    cert.sign(keys.forgePrivate, forge.md.sha256.create());
    this.cert = cert;
    this.key = keys.forgePrivate;
    this.certPem = forge.pki.certificateToPem(cert);
  }

  /** A certificate for a workload (server and client alike), with a fresh key. */
  issue(commonName: string, options: LeafOptions = {}): Issued {
    const keys = rsaKeyPair();
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.forgePublic;
    cert.serialNumber = serialNumber();
    cert.validity.notBefore = new Date(Date.now() - 60_000);
    cert.validity.notAfter = new Date(Date.now() + (options.validMs ?? DAY_MS));
    cert.setSubject([{ name: "commonName", value: commonName }]);
    cert.setIssuer(this.cert.subject.attributes);
    const altNames = [
      ...(options.uris ?? []).map((value) => ({ type: 6, value })),
      ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
      ...(options.ips ?? []).map((ip) => ({ type: 7, ip })),
    ];
    cert.setExtensions([
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true, clientAuth: true },
      { name: "authorityKeyIdentifier", keyIdentifier: this.cert.generateSubjectKeyIdentifier().getBytes() },
      ...(altNames.length > 0 ? [{ name: "subjectAltName", altNames }] : []),
    ]);
    cert.sign(this.key, forge.md.sha256.create());
    return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.keyPem };
  }
}

/** The files of a mounted `kubernetes.io/tls` Secret with `ca.crt` (cert-manager's layout). */
export interface SecretFiles {
  "tls.crt": string;
  "tls.key": string;
  "ca.crt": string;
}

/**
 * Writes (or replaces, in one rename) the files of a Secret mounted at `dir`, as the kubelet does:
 * `dir/<file>` → `..data/<file>`, `..data` → a directory of this version; the previous version's
 * directory is removed right after the swap, as the kubelet removes it.
 */
export function writeMountedSecret(dir: string, files: SecretFiles): void {
  mkdirSync(dir, { recursive: true });
  const version = `..${Date.now()}_${randomBytes(4).toString("hex")}`;
  mkdirSync(join(dir, version));
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(dir, version, name), content, { mode: 0o600 });
  const previous = readdirSync(dir).filter(
    (entry) => entry.startsWith("..") && entry !== "..data" && entry !== version && entry !== "..data_tmp",
  );
  symlinkSync(version, join(dir, "..data_tmp"));
  renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
  for (const name of Object.keys(files))
    if (!existsSync(join(dir, name))) symlinkSync(join("..data", name), join(dir, name));
  for (const old of previous) rmSync(join(dir, old), { recursive: true, force: true });
}

/** The environment that points a process at the Secret mounted at `dir`. */
export function tlsEnv(dir: string): NodeJS.ProcessEnv {
  return {
    GRPC_TLS_CERT_FILE: join(dir, "tls.crt"),
    GRPC_TLS_KEY_FILE: join(dir, "tls.key"),
    GRPC_TLS_CA_FILE: join(dir, "ca.crt"),
  };
}

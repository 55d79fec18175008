/**
 * TLS material for the nodes' TCP listeners (dockerd --tlsverify, the node agent): a CA made for this cluster only,
 * a server certificate per node (its node id as a DNS name — the identity the API binds the node to — and its
 * address) and one client certificate the host and the API replicas present. dockerd with --tlsverify refuses any client without a certificate from this
 * CA, so nothing unauthenticated listens on a node's address. Keys never leave the cluster directory (mode 0600).
 */
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import { run } from './docker.ts';

export interface ClientTls {
  ca: string;
  cert: string;
  key: string;
}

export interface ServerTls extends ClientTls {}

const DAYS = '30';

async function openssl(args: string[], cwd: string): Promise<void> {
  const res = await run('openssl', args, { cwd, timeoutMs: 60_000 });
  if (res.exitCode !== 0) throw new ClusterError('command', `openssl ${args[0]} failed: ${res.stderr.trim()}`);
}

async function newKey(dir: string, file: string): Promise<void> {
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], dir);
  chmodSync(join(dir, file), 0o600);
}

/** Signs `<name>.csr` with the CA into `<name>.pem` with the given extensions. */
async function sign(dir: string, name: string, subject: string, extensions: string): Promise<void> {
  await newKey(dir, `${name}-key.pem`);
  await openssl(['req', '-new', '-key', `${name}-key.pem`, '-subj', subject, '-out', `${name}.csr`], dir);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', DAYS, '-extfile', `${name}.ext`, '-out', `${name}.pem`], dir);
}

/** The cluster's CA and client certificate, made once per cluster directory. */
export async function ensureClusterTls(dir: string): Promise<ClientTls> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const client = { ca: join(dir, 'ca.pem'), cert: join(dir, 'client.pem'), key: join(dir, 'client-key.pem') };
  if (existsSync(client.ca) && existsSync(client.cert) && existsSync(client.key)) return client;
  await newKey(dir, 'ca-key.pem');
  await openssl(['req', '-x509', '-new', '-key', 'ca-key.pem', '-subj', '/CN=tidepool local cluster CA', '-days', DAYS, '-out', 'ca.pem'], dir);
  await sign(dir, 'client', '/CN=tidepool-cluster-client', 'extendedKeyUsage = clientAuth\n');
  return client;
}

/** `IP:<address>` for an IPv4/IPv6 literal, `DNS:<name>` for a host name; anything else is refused. */
export function subjectAltName(address: string): string {
  if (isIP(address)) return `IP:${address}`;
  if (/^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(address)) return `DNS:${address}`;
  throw new ClusterError('invalid', `'${address}' is neither an IP address nor a host name`);
}

/** Whether the certificate in `file` names `nodeId` as a DNS subjectAltName. */
function namesNode(file: string, nodeId: string): boolean {
  try {
    return (new X509Certificate(readFileSync(file)).subjectAltName ?? '').split(', ').includes(`DNS:${nodeId}`);
  } catch {
    return false;
  }
}

/**
 * A server certificate for one node, signed by the cluster CA (made once): its node id as a DNS name (the API accepts
 * a node's Hello only under an id its certificate names) and its address (an IP or a host name: dockerd's clients
 * check it). `name` is the file stem (`<nodeId>-server` by default). A certificate made before node ids were in it
 * is made again.
 */
export async function ensureNodeServerTls(dir: string, nodeId: string, address: string, name = `${nodeId}-server`): Promise<ServerTls> {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(nodeId)) throw new ClusterError('invalid', `'${nodeId}' is not a node id (lower-case letters, digits, dashes)`);
  const server = { ca: join(dir, 'ca.pem'), cert: join(dir, `${name}.pem`), key: join(dir, `${name}-key.pem`) };
  if (existsSync(server.cert) && existsSync(server.key) && namesNode(server.cert, nodeId)) return server;
  const names = [`DNS:${nodeId}`, subjectAltName(address)].filter((entry, i, all) => all.indexOf(entry) === i);
  await sign(dir, name, `/CN=${nodeId}`, `subjectAltName = ${names.join(', ')}\nextendedKeyUsage = serverAuth\n`);
  return server;
}

/**
 * A server certificate named `name` for several addresses at once (one SAN each), signed by the cluster CA (made
 * once): what a deployment that shares one certificate among machines uses (the Swarm stack's node agents, its
 * registry).
 */
export async function ensureSharedServerTls(dir: string, name: string, addresses: string[]): Promise<ServerTls> {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name)) throw new ClusterError('invalid', `'${name}' is not a certificate name (lower-case letters, digits, dashes)`);
  if (addresses.length === 0) throw new ClusterError('invalid', `a certificate for ${name} needs at least one address`);
  const server = { ca: join(dir, 'ca.pem'), cert: join(dir, `${name}.pem`), key: join(dir, `${name}-key.pem`) };
  if (existsSync(server.cert) && existsSync(server.key)) return server;
  await sign(dir, name, `/CN=${name}`, `subjectAltName = ${addresses.map(subjectAltName).join(', ')}\nextendedKeyUsage = serverAuth\n`);
  return server;
}

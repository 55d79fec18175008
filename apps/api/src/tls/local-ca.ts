/**
 * The platform's own local certificate authority: made once in `<dataDir>/tls` with the openssl CLI, kept
 * across restarts (never replaced silently: browsers and NODE_EXTRA_CA_CERTS trust it by file), and used to
 * sign the HTTPS listener's certificate for `<domain>`, `*.<domain>`, `localhost`, 127.0.0.1 and ::1. That
 * leaf is signed again whenever the domain changes, it nears its end, or it no longer matches the CA.
 *
 * The CA is name-constrained to `localhost` (and everything under it), the domain it was made for, and the
 * loopback addresses, so a copy of its key cannot be used to impersonate any other site to a machine that
 * trusts it.
 */
import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import type { Logger } from 'pino';
import { openssl, opensslConfig, serial, TlsSetupError } from './openssl-cli.ts';

const DAY_MS = 24 * 3600 * 1000;
/** The CA lives ten years; the server certificate one (well under every client's limit for local roots). */
export const CA_DAYS = 3650;
export const LEAF_DAYS = 365;
/** A server certificate with less than this left is signed again at start (and by the periodic check). */
export const RENEW_BEFORE_MS = 30 * DAY_MS;

export interface TlsMaterial {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
  /** The CA to trust (NODE_EXTRA_CA_CERTS, browsers); undefined for operator-supplied certificates. */
  caFile?: string;
}

export { TlsSetupError };

export interface LocalCaFiles {
  dir: string;
  caCert: string;
  caKey: string;
  cert: string;
  key: string;
}

export function localCaFiles(dataDir: string): LocalCaFiles {
  const dir = resolve(dataDir, 'tls');
  return { dir, caCert: join(dir, 'ca.crt'), caKey: join(dir, 'ca.key'), cert: join(dir, 'server.crt'), key: join(dir, 'server.key') };
}

/** Names the server certificate must cover for `domain`. */
export function serverNames(domain: string): { dns: string[]; ips: string[] } {
  const name = domain.toLowerCase();
  const dns = [name, `*.${name}`];
  if (name !== 'localhost') dns.push('localhost');
  return { dns, ips: ['127.0.0.1', '::1'] };
}

/**
 * Why the server certificate must be signed again, or undefined when it is good for `domain` until at least
 * `now + RENEW_BEFORE_MS` under this CA with this key.
 */
export function renewalReason(certPem: string, keyPem: string, caPem: string, domain: string, now = new Date()): string | undefined {
  let cert: X509Certificate;
  let ca: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
    ca = new X509Certificate(caPem);
  } catch {
    return 'unreadable certificate';
  }
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return 'not signed by the current CA';
  try {
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return 'key does not match';
  } catch {
    return 'unreadable key';
  }
  const names = serverNames(domain);
  // `checkHost` applies the same wildcard rules as clients: one label, not directly under a single-label name.
  // (A wildcard directly under a single-label name such as `localhost` is refused by clients: not checked there.)
  const hosts = domain.includes('.') ? [domain, `${ENVD_PORT}-probe.${domain}`] : [domain];
  for (const host of hosts) if (cert.checkHost(host) === undefined) return `does not cover ${host}`;
  for (const ip of names.ips) if (cert.checkIP(ip) === undefined) return `does not cover ${ip}`;
  const sans = (cert.subjectAltName ?? '').toLowerCase();
  for (const dns of names.dns) if (!sans.split(', ').includes(`dns:${dns}`)) return `does not name ${dns}`;
  if (new Date(cert.validFrom).getTime() > now.getTime()) return 'not valid yet';
  if (new Date(cert.validTo).getTime() - now.getTime() < RENEW_BEFORE_MS) return 'expires soon';
  return undefined;
}

/** The DNS names and addresses a local CA made for `domain` may sign for. */
export function caPermittedNames(domain: string): string[] {
  const name = domain.toLowerCase();
  const dns = name === 'localhost' || name.endsWith('.localhost') ? ['localhost'] : ['localhost', name];
  return [...dns.map((d) => `permitted;DNS:${d}`), 'permitted;IP:127.0.0.0/255.0.0.0', 'permitted;IP:::1/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'];
}

/**
 * True when the CA's name constraints allow a certificate for `domain` (and names under it). Node does not
 * expose name constraints, so the CA carries the DNS names it was made for in its subject (`OU=names: …`).
 */
export function caAllowsDomain(caPem: string, domain: string): boolean {
  const permitted = /OU=names: ([^\n]+)/.exec(new X509Certificate(caPem).subject)?.[1]?.split(' ');
  if (!permitted) return true;
  const name = domain.toLowerCase();
  return permitted.some((p) => name === p || name.endsWith(`.${p}`));
}

/** Keys are 0600 and the directory 0700; looser modes (restored backups, copies) are tightened and logged. */
function tighten(path: string, mode: number, logger: Logger): void {
  const current = statSync(path).mode & 0o777;
  if ((current & ~mode) !== 0) {
    chmodSync(path, mode);
    logger.warn({ path, was: current.toString(8), now: mode.toString(8) }, 'tightened the mode of a TLS file');
  }
}

/** Makes the CA when there is none; refuses a half-present or expired one instead of replacing it. */
async function ensureCa(files: LocalCaFiles, domain: string, logger: Logger, now: Date): Promise<string> {
  const hasCert = existsSync(files.caCert);
  const hasKey = existsSync(files.caKey);
  const recreate = `delete ${files.dir} to make a new CA (clients must then trust the new ${files.caCert})`;
  if (hasCert !== hasKey) {
    throw new TlsSetupError(`the local CA is incomplete: ${hasCert ? files.caKey : files.caCert} is missing; restore it, or ${recreate}`);
  }
  if (!hasCert) {
    const permitted = caPermittedNames(domain);
    const names = permitted.filter((p) => p.startsWith('permitted;DNS:')).map((p) => p.slice('permitted;DNS:'.length));
    const config = join(files.dir, 'openssl-ca.cnf');
    writeFileSync(config, opensslConfig(`Tidepool local CA ${now.toISOString().slice(0, 10)} ${randomBytes(3).toString('hex')}`, `names: ${names.join(' ')}`, permitted, { dns: [], ips: [] }), { mode: 0o600 });
    try {
      await openssl([
        'req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256',
        '-days', String(CA_DAYS), '-set_serial', serial(), '-config', config, '-extensions', 'ca_ext',
        '-keyout', `${files.caKey}.new`, '-out', `${files.caCert}.new`,
      ]);
      chmodSync(`${files.caKey}.new`, 0o600);
      chmodSync(`${files.caCert}.new`, 0o644);
      renameSync(`${files.caKey}.new`, files.caKey);
      renameSync(`${files.caCert}.new`, files.caCert);
    } finally {
      rmSync(config, { force: true });
      rmSync(`${files.caKey}.new`, { force: true });
      rmSync(`${files.caCert}.new`, { force: true });
    }
    logger.warn({ caFile: files.caCert }, `made a local certificate authority: trust ${files.caCert} (NODE_EXTRA_CA_CERTS, browsers); it is kept across restarts`);
  }
  tighten(files.caKey, 0o600, logger);
  const caPem = readFileSync(files.caCert, 'utf8');
  let ca: X509Certificate;
  try {
    ca = new X509Certificate(caPem);
  } catch {
    throw new TlsSetupError(`${files.caCert} is not a readable certificate; restore it, or ${recreate}`);
  }
  const left = new Date(ca.validTo).getTime() - now.getTime();
  if (left <= 0) throw new TlsSetupError(`the local CA ${files.caCert} expired on ${ca.validTo}; ${recreate}`);
  if (left < RENEW_BEFORE_MS) logger.warn({ caFile: files.caCert, validTo: ca.validTo }, `the local CA expires soon; ${recreate}`);
  if (!caAllowsDomain(caPem, domain)) {
    throw new TlsSetupError(`the local CA ${files.caCert} may only sign names under ${/OU=names: ([^\n]+)/.exec(ca.subject)?.[1] ?? '?'}, not ${domain}; ${recreate}`);
  }
  return caPem;
}

async function signServerCertificate(files: LocalCaFiles, domain: string): Promise<void> {
  const config = join(files.dir, 'openssl-server.cnf');
  const csr = join(files.dir, 'server.csr');
  writeFileSync(config, opensslConfig(domain, '', [], serverNames(domain)), { mode: 0o600 });
  try {
    await openssl([
      'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256',
      '-config', config, '-keyout', `${files.key}.new`, '-out', csr,
    ]);
    await openssl([
      'x509', '-req', '-in', csr, '-CA', files.caCert, '-CAkey', files.caKey, '-set_serial', serial(), '-sha256',
      '-days', String(LEAF_DAYS), '-extfile', config, '-extensions', 'leaf_ext', '-out', `${files.cert}.new`,
    ]);
    chmodSync(`${files.key}.new`, 0o600);
    renameSync(`${files.key}.new`, files.key);
    renameSync(`${files.cert}.new`, files.cert);
  } finally {
    for (const path of [config, csr, `${files.key}.new`, `${files.cert}.new`]) rmSync(path, { force: true });
  }
}

/**
 * A CA made for a single-label domain other than `localhost` would be name-constrained to a whole top-level
 * domain: trusted once, it could sign for every site under it.
 */
function refuseBareTld(domain: string): void {
  const name = domain.toLowerCase();
  if (name === 'localhost' || name.includes('.')) return;
  throw new TlsSetupError(
    `TIDEPOOL_DOMAIN "${domain}" is a bare top-level domain: the local CA would be trusted for every name under it. Use a name under it, like tidepool.${name}, or set TIDEPOOL_TLS_CERT and TIDEPOOL_TLS_KEY`,
  );
}

/**
 * The local CA's server certificate for `domain`: the CA is made on first use, the certificate signed again
 * when it no longer fits (see renewalReason). Returns the PEMs to serve and where the CA to trust is.
 */
export async function localCertificate(options: { dataDir: string; domain: string; logger: Logger; now?: Date }): Promise<TlsMaterial> {
  const { domain, logger } = options;
  refuseBareTld(domain);
  const now = options.now ?? new Date();
  const files = localCaFiles(options.dataDir);
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  tighten(files.dir, 0o700, logger);
  if (!domain.includes('.')) {
    logger.warn({ domain }, `a wildcard certificate directly under "${domain}" is refused by Node, curl and browsers: use a domain with two labels, like tidepool.${domain}`);
  }
  const caPem = await ensureCa(files, domain, logger, now);
  const present = existsSync(files.cert) && existsSync(files.key);
  const reason = present ? renewalReason(readFileSync(files.cert, 'utf8'), readFileSync(files.key, 'utf8'), caPem, domain, now) : 'none yet';
  if (reason !== undefined) {
    await signServerCertificate(files, domain);
    logger.info({ certFile: files.cert, domain, reason }, 'signed a server certificate with the local CA');
  }
  tighten(files.key, 0o600, logger);
  return { cert: readFileSync(files.cert, 'utf8'), key: readFileSync(files.key, 'utf8'), certFile: files.cert, keyFile: files.key, caFile: files.caCert };
}

/** Operator-supplied PEM files: read, checked to belong together, and checked (with a warning) against the domain. */
export function certificateFromFiles(options: { certFile: string; keyFile: string; domain: string; logger: Logger; now?: Date }): TlsMaterial {
  const { certFile, keyFile, domain, logger } = options;
  let cert: string;
  let key: string;
  try {
    cert = readFileSync(certFile, 'utf8');
    key = readFileSync(keyFile, 'utf8');
  } catch (error) {
    throw new TlsSetupError(`cannot read the TLS certificate or key: ${(error as Error).message}`);
  }
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
    if (!leaf.checkPrivateKey(createPrivateKey(key))) throw new TlsSetupError(`${keyFile} is not the key of ${certFile}`);
  } catch (error) {
    if (error instanceof TlsSetupError) throw error;
    throw new TlsSetupError(`TIDEPOOL_TLS_CERT / TIDEPOOL_TLS_KEY: ${(error as Error).message}`);
  }
  const probe = `${ENVD_PORT}-probe.${domain}`;
  if (leaf.checkHost(probe) === undefined) logger.warn({ certFile, domain }, `the TLS certificate does not cover *.${domain}: sandbox URLs will fail verification`);
  const left = new Date(leaf.validTo).getTime() - (options.now ?? new Date()).getTime();
  if (left <= 0) logger.error({ certFile, validTo: leaf.validTo }, 'the TLS certificate has expired');
  else if (left < RENEW_BEFORE_MS) logger.warn({ certFile, validTo: leaf.validTo }, 'the TLS certificate expires soon');
  return { cert, key, certFile, keyFile };
}

/**
 * The openssl CLI as the platform's certificate authorities use it (the local CA of the HTTPS listener, the
 * per-sandbox egress CAs): one config layout with a CA and a leaf section, random serials, clear errors.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export class TlsSetupError extends Error {
  readonly code = 'tls_setup';
}

/** A positive random 128-bit serial, as openssl takes it. */
export function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f;
  return `0x${bytes.toString('hex')}`;
}

/**
 * An openssl config with `[ca_ext]` (a CA that signs leaves only; name-constrained to `permitted` when any)
 * and `[leaf_ext]` (a TLS server certificate for `names`). Every name must have been validated by the caller:
 * the config is line-based text.
 */
export function opensslConfig(commonName: string, organizationalUnit: string, permitted: string[], names: { dns: string[]; ips: string[] }): string {
  const alt = [...names.dns.map((d) => `DNS:${d}`), ...names.ips.map((ip) => `IP:${ip}`)].join(', ');
  return [
    '[req]',
    'distinguished_name = dn',
    'prompt = no',
    '[dn]',
    `CN = ${commonName}`,
    ...(organizationalUnit ? [`OU = ${organizationalUnit}`] : []),
    '[ca_ext]',
    'basicConstraints = critical, CA:TRUE, pathlen:0',
    'keyUsage = critical, keyCertSign, cRLSign',
    'subjectKeyIdentifier = hash',
    ...(permitted.length > 0 ? [`nameConstraints = critical, ${permitted.join(', ')}`] : []),
    '[leaf_ext]',
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature', // ECDSA keys: signatures only
    'extendedKeyUsage = serverAuth',
    'subjectKeyIdentifier = hash',
    'authorityKeyIdentifier = keyid:always',
    ...(alt ? [`subjectAltName = ${alt}`] : []),
    '',
  ].join('\n');
}

export async function openssl(args: string[]): Promise<void> {
  try {
    await exec('openssl', args, { timeout: 60_000 });
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new TlsSetupError('the openssl command is needed to make certificates (Debian: apt-get install openssl); for the HTTPS listener, TIDEPOOL_TLS_CERT and TIDEPOOL_TLS_KEY avoid it');
    throw new TlsSetupError(`openssl ${args[0]} failed: ${(e.stderr ?? e.message).trim()}`);
  }
}

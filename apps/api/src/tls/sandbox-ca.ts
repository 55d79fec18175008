/**
 * Per-sandbox certificate authorities for the egress proxy's TLS termination (network.rules transforms over
 * HTTPS). Each sandbox that has transform rules gets its own CA, made with the openssl CLI on first use and
 * kept in `<dataDir>/sandbox-ca/<sandboxId>/` (key 0600, directory 0700) so the sandbox keeps trusting it
 * across platform restarts. Only the CA *certificate* is ever given to the sandbox; the key stays on the host.
 * A CA trusted by one sandbox is useless to any other sandbox (each trusts only its own).
 *
 * Leaf certificates are signed per server name on demand and kept in memory only. Issuing is serialised per
 * sandbox and bounded, so a sandbox asking for endless names under a wildcard rule costs at most one openssl
 * run at a time.
 */
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { openssl, opensslConfig, serial, TlsSetupError } from './openssl-cli.ts';

const CA_DAYS = 3650;
const LEAF_DAYS = 7;
const LEAF_RENEW_BEFORE_MS = 24 * 3600 * 1000;
/** Leaves kept per sandbox (least recently issued are dropped first). */
const MAX_LEAVES_PER_SANDBOX = 64;
const SANDBOX_ID = /^[A-Za-z0-9_-]{1,64}$/;
const SERVER_NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

export interface LeafCertificate {
  key: string;
  cert: string;
}

interface CachedLeaf extends LeafCertificate {
  renewAt: number;
}

interface SandboxAuthority {
  caPem: string;
  leaves: Map<string, Promise<CachedLeaf>>;
  /** Issuing runs one at a time per sandbox. */
  queue: Promise<unknown>;
}

export class SandboxCertificateAuthorities {
  private readonly root: string;
  private readonly authorities = new Map<string, Promise<SandboxAuthority>>();

  constructor(dataDir: string, private readonly logger: Logger) {
    this.root = resolve(dataDir, 'sandbox-ca');
  }

  /** The sandbox's CA certificate (PEM), made on first use. */
  async caCertificate(sandboxId: string): Promise<string> {
    return (await this.authority(sandboxId)).caPem;
  }

  /** A server certificate for `serverName` signed by the sandbox's CA. */
  async leaf(sandboxId: string, serverName: string): Promise<LeafCertificate> {
    const name = serverName.toLowerCase();
    if (!SERVER_NAME.test(name)) throw new TlsSetupError(`not a DNS name a certificate can be issued for: ${JSON.stringify(serverName.slice(0, 80))}`);
    const authority = await this.authority(sandboxId);
    const cached = authority.leaves.get(name);
    if (cached) {
      const leaf = await cached.catch(() => undefined);
      if (leaf && leaf.renewAt > Date.now()) return leaf;
      if (authority.leaves.get(name) === cached) authority.leaves.delete(name);
    }
    const issued = authority.queue.then(() => this.issue(sandboxId, name));
    authority.queue = issued.catch(() => undefined);
    authority.leaves.set(name, issued);
    issued.catch(() => authority.leaves.get(name) === issued && authority.leaves.delete(name));
    while (authority.leaves.size > MAX_LEAVES_PER_SANDBOX) authority.leaves.delete(authority.leaves.keys().next().value!);
    return issued;
  }

  /** Drops the sandbox's CA (its key file included): the sandbox is gone. */
  forget(sandboxId: string): void {
    this.authorities.delete(sandboxId);
    if (SANDBOX_ID.test(sandboxId)) rmSync(join(this.root, sandboxId), { recursive: true, force: true });
  }

  /** Drops the CAs of sandboxes that no longer exist (after a restart). */
  prune(alive: ReadonlySet<string>): void {
    if (!existsSync(this.root)) return;
    for (const sandboxId of readdirSync(this.root)) if (!alive.has(sandboxId)) this.forget(sandboxId);
  }

  private authority(sandboxId: string): Promise<SandboxAuthority> {
    if (!SANDBOX_ID.test(sandboxId)) return Promise.reject(new TlsSetupError(`not a sandbox id: ${JSON.stringify(sandboxId.slice(0, 80))}`));
    let authority = this.authorities.get(sandboxId);
    if (!authority) {
      authority = this.loadOrMake(sandboxId).then((caPem) => ({ caPem, leaves: new Map(), queue: Promise.resolve() }));
      this.authorities.set(sandboxId, authority);
      authority.catch(() => this.authorities.get(sandboxId) === authority && this.authorities.delete(sandboxId));
    }
    return authority;
  }

  private dir(sandboxId: string): { dir: string; caCert: string; caKey: string } {
    const dir = join(this.root, sandboxId);
    return { dir, caCert: join(dir, 'ca.crt'), caKey: join(dir, 'ca.key') };
  }

  private async loadOrMake(sandboxId: string): Promise<string> {
    const files = this.dir(sandboxId);
    if (existsSync(files.caCert) && existsSync(files.caKey)) return readFileSync(files.caCert, 'utf8');
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    mkdirSync(files.dir, { recursive: true, mode: 0o700 });
    const work = mkdtempSync(join(files.dir, 'new-'));
    try {
      const config = join(work, 'ca.cnf');
      writeFileSync(config, opensslConfig(`Tidepool egress CA for sandbox ${sandboxId}`, '', [], { dns: [], ips: [] }), { mode: 0o600 });
      await openssl([
        'req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256',
        '-days', String(CA_DAYS), '-set_serial', serial(), '-config', config, '-extensions', 'ca_ext',
        '-keyout', join(work, 'ca.key'), '-out', join(work, 'ca.crt'),
      ]);
      chmodSync(join(work, 'ca.key'), 0o600);
      // The key first: a crash between the renames leaves no certificate without its key (made again next time).
      renameSync(join(work, 'ca.key'), files.caKey);
      renameSync(join(work, 'ca.crt'), files.caCert);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    this.logger.info({ sandboxId }, 'made the sandbox egress CA (for network.rules transforms over HTTPS)');
    return readFileSync(files.caCert, 'utf8');
  }

  private async issue(sandboxId: string, name: string): Promise<CachedLeaf> {
    const files = this.dir(sandboxId);
    const work = mkdtempSync(join(files.dir, 'leaf-'));
    try {
      const config = join(work, 'leaf.cnf');
      writeFileSync(config, opensslConfig(name, '', [], { dns: [name], ips: [] }), { mode: 0o600 });
      await openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256', '-config', config, '-keyout', join(work, 'leaf.key'), '-out', join(work, 'leaf.csr')]);
      await openssl([
        'x509', '-req', '-in', join(work, 'leaf.csr'), '-CA', files.caCert, '-CAkey', files.caKey, '-set_serial', serial(), '-sha256',
        '-days', String(LEAF_DAYS), '-extfile', config, '-extensions', 'leaf_ext', '-out', join(work, 'leaf.crt'),
      ]);
      const cert = readFileSync(join(work, 'leaf.crt'), 'utf8');
      const renewAt = new Date(new X509Certificate(cert).validTo).getTime() - LEAF_RENEW_BEFORE_MS;
      this.logger.debug({ sandboxId, serverName: name }, 'signed an egress certificate');
      return { key: readFileSync(join(work, 'leaf.key'), 'utf8'), cert, renewAt };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}

/**
 * The sandbox side of network.rules transforms over HTTPS: the sandbox's own egress CA *certificate* (never its
 * key) is put into the sandbox's trust store, and the environment points the usual libraries at it.
 */
import type { EnvdDial } from '../../envd/envd-client.ts';
import { EnvdProcessClient, shellCommand } from '../../envd/envd-process-client.ts';
import { PlatformError } from '../../errors.ts';
import type { SandboxNetwork, SandboxRecord } from '../registry/sandbox-record.ts';

/** The CA certificate alone (Node's NODE_EXTRA_CA_CERTS adds it to its own roots). */
export const EGRESS_CA_FILE = '/usr/local/share/ca-certificates/tidepool-egress-ca.crt';
/** The system bundle (Debian layout) curl, OpenSSL and Python's ssl read; the CA is appended to it once. */
export const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/** What the per-sandbox egress state is kept by: the sandbox on its node. */
export type EgressHolder = Pick<SandboxRecord, 'sandboxId' | 'nodeId' | 'teamId' | 'network'>;

/**
 * The per-sandbox egress state on a sandbox's node (sandbox-egress.ts): which CA certificate the sandbox trusts
 * for its transformed destinations, and the secret values its rules name where the node needs them pushed.
 */
export interface EgressTrustSource {
  caCertificate(sandbox: EgressHolder): Promise<string>;
  /** Puts the values of the secrets the sandbox's rules name in force on its node (a node agent keeps them in memory). */
  pushSecrets(sandbox: EgressHolder): Promise<void>;
  /** The sandbox is gone: its CA (key included) and its secrets go too (failures are logged, not thrown). */
  forget(sandbox: EgressHolder): void;
}

export function hasTransforms(network: SandboxNetwork): boolean {
  return network.rules !== undefined && Object.keys(network.rules).length > 0;
}

/** Environment for processes of a sandbox with transforms, below the sandbox's own envVars. */
export function egressTrustEnv(network: SandboxNetwork): Record<string, string> {
  if (!hasTransforms(network)) return {};
  return { NODE_EXTRA_CA_CERTS: EGRESS_CA_FILE, REQUESTS_CA_BUNDLE: SYSTEM_CA_BUNDLE, SSL_CERT_FILE: SYSTEM_CA_BUNDLE, CURL_CA_BUNDLE: SYSTEM_CA_BUNDLE };
}

// Writes the CA file and appends the CA to the system bundle unless it is there already (resumes, retries).
const INSTALL_SCRIPT = [
  'set -e',
  `mkdir -p "$(dirname ${EGRESS_CA_FILE})" "$(dirname ${SYSTEM_CA_BUNDLE})"`,
  `printf '%s\\n' "$TIDEPOOL_EGRESS_CA" > ${EGRESS_CA_FILE}`,
  `chmod 644 ${EGRESS_CA_FILE}`,
  `marker=$(sed -n 2p ${EGRESS_CA_FILE})`,
  `if ! grep -qxF -- "$marker" ${SYSTEM_CA_BUNDLE} 2>/dev/null; then printf '%s\\n' "$TIDEPOOL_EGRESS_CA" >> ${SYSTEM_CA_BUNDLE}; fi`,
].join('\n');

/** Installs the CA certificate in the sandbox (as root, through envd; over its node's dial when given). */
export async function installEgressCa(address: string, accessToken: string, caPem: string, dial?: EnvdDial): Promise<void> {
  const envd = new EnvdProcessClient(address, { accessToken, ...(dial ? { dial } : {}) });
  let stderr = '';
  const result = await envd.run(shellCommand(INSTALL_SCRIPT, { user: 'root', envs: { TIDEPOOL_EGRESS_CA: caPem.trim() }, timeoutMs: 30_000 }), { stderr: (text) => (stderr += text) });
  if (result.exitCode !== 0) throw new PlatformError('internal', `could not install the sandbox's egress CA certificate (${result.status}): ${stderr.trim().slice(0, 300)}`);
}

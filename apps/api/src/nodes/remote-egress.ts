/**
 * A node agent's per-sandbox egress state over the mutual-TLS channel (the agent's egress-routes.ts): secret values
 * pushed for one sandbox, its CA certificate fetched, both forgotten. A value travels in the push body only: it is
 * never part of a path, an error or a log line.
 */
import type { NodeChannel } from './node-channel-client.ts';
import { decodeError } from './node-channel-errors.ts';
import type { NodeEgress } from './sandbox-node.ts';

const EGRESS_CALL_MS = 30_000;
const PEM_CERTIFICATE = /^-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\r?\n?$/;

export function remoteEgress(channel: NodeChannel): NodeEgress {
  const call = async (method: string, sandboxId: string, suffix: string, body: unknown, what: string): Promise<unknown> => {
    const { status, value } = await channel.json(method, `/v1/egress/${encodeURIComponent(sandboxId)}${suffix}`, body, EGRESS_CALL_MS, what);
    if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, channel.nodeId);
    if (status !== 200 || typeof value !== 'object' || value === null || !('result' in value)) throw channel.fail('protocol', `${what}: answered HTTP ${status} without a result or an error`);
    return (value as { result: unknown }).result;
  };
  return {
    async caCertificate(sandboxId) {
      const pem = await call('GET', sandboxId, '/ca', undefined, `egress CA of ${sandboxId}`);
      if (typeof pem !== 'string' || pem.length > 16_384 || !PEM_CERTIFICATE.test(pem)) throw channel.fail('protocol', `egress CA of ${sandboxId}: answered something that is not one PEM certificate`);
      return pem;
    },
    async pushSecrets(sandboxId, secrets) {
      await call('POST', sandboxId, '', { secrets }, `egress secrets of ${sandboxId}`);
    },
    async forget(sandboxId) {
      await call('DELETE', sandboxId, '', undefined, `forgetting the egress state of ${sandboxId}`);
    },
  };
}

/**
 * Cluster mode's node factory: the API builds the SandboxNode of every node-table row it does not run itself by
 * connecting to that row's agent over mutual TLS (connectRemoteNode) with the API's cluster client certificate.
 * Rows that are no agent — another replica's in-process node (`embedded://…`), or a URL that is not https — are
 * left alone: this API cannot reach those engines, so it never places on them.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { ConfigError } from '../settings/config-error.ts';
import type { ClusterSettings } from './cluster-settings.ts';
import type { NodeTls } from './node-channel-client.ts';
import type { NodeFactory } from './node-set.ts';
import { connectRemoteNode } from './remote-node.ts';

/** The API's client certificate, key and the cluster CA, read once at start; undefined when cluster mode is off. */
export function clusterClientTls(config: Pick<ClusterSettings, 'clusterClientCert' | 'clusterClientKey' | 'clusterCa'>): NodeTls | undefined {
  if (!config.clusterClientCert) return undefined;
  const read = (file: string, setting: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new ConfigError(`invalid configuration:\n  ${setting}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  return {
    cert: read(config.clusterClientCert, 'TIDEPOOL_CLUSTER_CLIENT_CERT'),
    key: read(config.clusterClientKey, 'TIDEPOOL_CLUSTER_CLIENT_KEY'),
    ca: read(config.clusterCa, 'TIDEPOOL_CLUSTER_CA'),
  };
}

/** Builds remote nodes from agent rows; logs (once per node) the rows it cannot drive. */
export function remoteNodeFactory(tls: NodeTls, logger: Logger): NodeFactory {
  const skipped = new Set<string>();
  const skip = (nodeId: string, url: string, why: string): undefined => {
    if (!skipped.has(nodeId)) logger.info({ nodeId, url: url.slice(0, 200) }, `node not driven by this API: ${why}`);
    skipped.add(nodeId);
    return undefined;
  };
  return (row) => {
    let url: URL;
    try {
      url = new URL(row.url);
    } catch {
      return skip(row.nodeId, row.url, 'its URL is not a URL');
    }
    if (url.protocol !== 'https:') return skip(row.nodeId, row.url, 'it is not an agent (no https URL: another process runs it in itself)');
    logger.info({ nodeId: row.nodeId, url: url.origin }, 'driving a node agent');
    return connectRemoteNode({ nodeId: row.nodeId, url: url.origin, tls });
  };
}

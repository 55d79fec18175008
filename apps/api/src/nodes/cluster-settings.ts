/** The API side of cluster mode: its own node, the node agents it drives, and how it reaches them. */
import { Type } from '@sinclair/typebox';
import { flag, integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const clusterSettings = settingsGroup('Cluster: node identity and the API side', {
  nodeId: setting(Type.String({ pattern: '^$|^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' }), {
    env: 'TIDEPOOL_NODE_ID',
    read: (env) => text(env.TIDEPOOL_NODE_ID),
    default: 'the hostname (`tidepool node`); the platform id (embedded)',
    description:
      '`tidepool node`: this node\'s id (lower-case letters, digits, dashes); see [the node agent](cluster.md#the-node-agent-tidepool-node). Embedded: id of the node this process embeds (letters, digits, `.`, `_`, `-`; at most 63): its sandboxes answer it as `clientID`. Keep it stable: after a change the sandboxes recorded under the old id are not adopted, and their containers on this engine are removed as orphans; [Nodes](cluster.md#nodes-placement-and-node-loss)',
    forms: 'a letter or digit, then up to 62 of letters, digits, ._- (or empty)',
  }),
  embeddedNode: setting(Type.Boolean(), {
    env: 'TIDEPOOL_EMBEDDED_NODE',
    read: (env) => flag(env.TIDEPOOL_EMBEDDED_NODE, true),
    default: 'on',
    description:
      '`tidepool api` embeds a node of its own (this machine\'s Docker engine). `off`: an engine-free API that touches no local engine (no Docker socket, no lxcfs, no local volumes directory) and places every sandbox, warm pool and volume on node agents; needs `TIDEPOOL_CLUSTER_CLIENT_*`. Template builds run on agents when `TIDEPOOL_REGISTRY` is set (else they answer an error)',
  }),
  clusterClientCert: setting(Type.String(), {
    env: 'TIDEPOOL_CLUSTER_CLIENT_CERT',
    read: (env) => text(env.TIDEPOOL_CLUSTER_CLIENT_CERT),
    default: 'unset',
    description:
      'the API side of cluster mode: the client certificate (PEM file) the API presents to node agents; with `TIDEPOOL_CLUSTER_CLIENT_KEY` and `TIDEPOOL_CLUSTER_CA`, all three or none. Set, the API drives every node agent it finds through `TIDEPOOL_NODES`',
  }),
  clusterClientKey: setting(Type.String(), {
    env: 'TIDEPOOL_CLUSTER_CLIENT_KEY',
    read: (env) => text(env.TIDEPOOL_CLUSTER_CLIENT_KEY),
    default: 'unset',
    description: 'the key (PEM file) of `TIDEPOOL_CLUSTER_CLIENT_CERT`',
  }),
  clusterCa: setting(Type.String(), {
    env: 'TIDEPOOL_CLUSTER_CA',
    read: (env) => text(env.TIDEPOOL_CLUSTER_CA),
    default: 'unset',
    description:
      'the CA (PEM file) the agents\' server certificates come from; it may be a bundle of several CAs: an agent\'s certificate from any of them is accepted, and must name the agent\'s node id as a DNS subjectAltName',
  }),
  nodes: setting(Type.Array(Type.String({ maxLength: 300 }), { maxItems: 256 }), {
    env: 'TIDEPOOL_NODES',
    read: (env) => text(env.TIDEPOOL_NODES).split(',').map((entry) => entry.trim()).filter((entry) => entry !== ''),
    default: 'unset',
    description:
      'the API side of cluster mode: where the node agents are, a comma list of `https://host:port` (only scheme, host and port). A host name that resolves to several addresses is one agent per address (Kubernetes: a headless Service; the Swarm stack\'s agents run on the host network, which gets no Swarm DNS name, so its env file lists `https://<machine address>:7443` for every machine). Every heartbeat interval the API resolves each entry again, says the node protocol\'s Hello to every address and records the node it answers as in the node table; needs `TIDEPOOL_CLUSTER_CLIENT_*`. A node holds no database credentials: `tidepool node` refuses to start with `TIDEPOOL_DATABASE_URL`, `TIDEPOOL_DATABASE_PASSWORD_FILE`, `TIDEPOOL_SECRETS_KEY`, `TIDEPOOL_TOKEN_SEED_FILE` or `TIDEPOOL_ADMIN_KEY` set',
    forms: 'a comma list of at most 256 https://host:port',
  }),
  nodeLostAfterSeconds: setting(Type.Integer({ minimum: 1, maximum: 86400 }), {
    env: 'TIDEPOOL_NODE_LOST_AFTER_SECONDS',
    read: (env) => integer(env.TIDEPOOL_NODE_LOST_AFTER_SECONDS, 30),
    default: '30',
    description:
      'a node whose last heartbeat is older than this is marked lost: its running and memory-paused sandboxes answer 404 saying so, nothing is placed there',
  }),
});

export type ClusterSettings = SettingsOf<typeof clusterSettings>;

/** What is wrong with one TIDEPOOL_NODES entry (`https://host:port`, nothing else), or undefined. */
export function nodeEntryProblem(entry: string): string | undefined {
  const example = 'https://host:port, e.g. https://10.0.0.5:7443 or a name resolving to every agent';
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return `${JSON.stringify(entry.slice(0, 100))} is not a URL; expected ${example}`;
  }
  if (url.protocol !== 'https:') return `${JSON.stringify(entry.slice(0, 100))}: agents speak mutual TLS only; expected ${example}`;
  if (!url.hostname || url.port === '') return `${JSON.stringify(entry.slice(0, 100))} names no host and port; expected ${example}`;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) return `${JSON.stringify(entry.slice(0, 100))} must be only scheme, host and port; expected ${example}`;
  return undefined;
}

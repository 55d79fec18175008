/** `tidepool node`: the agent's listener, its certificates, and what a node must not be given. */
import { existsSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { ClusterSettings } from '../nodes/cluster-settings.ts';
import { LISTEN_ADDRESS_PATTERN } from '../observability/metrics-route.ts';
import { text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const nodeAgentSettings = settingsGroup('Cluster: the node agent (`tidepool node`)', {
  nodeListen: setting(Type.String({ pattern: '^(\\[[0-9A-Fa-f:]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$' }), {
    env: 'TIDEPOOL_NODE_LISTEN',
    read: (env) => text(env.TIDEPOOL_NODE_LISTEN) || '0.0.0.0:7443',
    default: '`0.0.0.0:7443`',
    description: '`tidepool node`: `host:port` of the agent\'s listener (mutual TLS only)',
    forms: 'host:port, e.g. 0.0.0.0:7443 or [::]:7443',
  }),
  nodeMetricsListen: setting(Type.String({ pattern: LISTEN_ADDRESS_PATTERN }), {
    env: 'TIDEPOOL_NODE_METRICS_LISTEN',
    read: (env) => text(env.TIDEPOOL_NODE_METRICS_LISTEN),
    default: 'none',
    description:
      '`tidepool node`: `host:port` of a listener serving only the agent\'s own `GET /metrics` (Prometheus text), **without** authentication: bind it to an address only Prometheus reaches; see [Node metrics](operations.md#node-metrics)',
    forms: 'host:port (e.g. 10.0.0.5:9465), or empty',
  }),
  nodeUrl: setting(Type.String({ pattern: '^(https://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:]+\\]):[0-9]{1,5})?$' }), {
    env: 'TIDEPOOL_NODE_URL',
    read: (env) => text(env.TIDEPOOL_NODE_URL),
    default: 'the bound address',
    description: '`tidepool node`: the `https://host:port` the API reaches the agent at; sandboxes are kept from reaching it',
    forms: 'https://host:port, or empty',
  }),
  nodeTlsCert: setting(Type.String(), {
    env: 'TIDEPOOL_NODE_TLS_CERT',
    read: (env) => text(env.TIDEPOOL_NODE_TLS_CERT),
    default: 'required for `tidepool node`',
    description:
      'PEM file: the agent\'s server certificate, signed by the cluster CA, naming its address and its node id as subject alternative names; checked at start (missing file: the start fails naming the variable)',
  }),
  nodeTlsKey: setting(Type.String(), {
    env: 'TIDEPOOL_NODE_TLS_KEY',
    read: (env) => text(env.TIDEPOOL_NODE_TLS_KEY),
    default: 'required for `tidepool node`',
    description: 'PEM file: the key of `TIDEPOOL_NODE_TLS_CERT`; checked at start like it',
  }),
  nodeTlsCa: setting(Type.String(), {
    env: 'TIDEPOOL_NODE_TLS_CA',
    read: (env) => text(env.TIDEPOOL_NODE_TLS_CA),
    default: 'required for `tidepool node`',
    description: 'PEM file: the cluster CA whose *client* certificates alone are served; checked at start like the certificate',
  }),
  nodePlatformId: setting(Type.String({ pattern: '^[A-Za-z0-9_-]{0,64}$' }), {
    env: 'TIDEPOOL_NODE_PLATFORM_ID',
    read: (env) => text(env.TIDEPOOL_NODE_PLATFORM_ID),
    default: '`node-<node id>`',
    description: '`tidepool node`: the platform id stamped on the node\'s containers and committed filesystems (give every node the cluster\'s)',
    forms: 'up to 64 of letters, digits, _ and -',
  }),
});

export type NodeAgentSettings = SettingsOf<typeof nodeAgentSettings>;

/**
 * Settings a node must not be given: a node holds no cluster secrets (no database credentials, no key the API keeps),
 * so a node handed one refuses to start rather than keep it. Each problem names the variable.
 */
export function nodeSecretProblems(env: NodeJS.ProcessEnv): string[] {
  const refused: [string, string][] = [
    ['TIDEPOOL_DATABASE_URL', 'a node holds no database credentials: API replicas find nodes (TIDEPOOL_NODES) and keep the node table themselves; remove it from the node'],
    ['TIDEPOOL_DATABASE_PASSWORD_FILE', 'a node holds no database credentials; remove it from the node'],
    ['TIDEPOOL_SECRETS_KEY', 'the secrets key is the API replicas\' alone (sandbox secrets reach a node one sandbox at a time); remove it from the node'],
    ['TIDEPOOL_TOKEN_SEED_FILE', 'the token seed is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_ADMIN_KEY', 'the admin key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_SECRETS_KEY_FILE', 'the secrets key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_ADMIN_KEY_FILE', 'the admin key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_API_KEYS', 'API keys are the API replicas\' alone; remove them from the node'],
    ['TIDEPOOL_API_KEYS_FILE', 'API keys are the API replicas\' alone; remove them from the node'],
  ];
  return refused.filter(([name]) => (env[name] ?? '').trim() !== '').map(([name, why]) => `${name} is set: ${why}`);
}

/**
 * What `tidepool node` needs beyond the common settings: its listener's certificate, key and the cluster CA (all
 * readable files), and an id. Checked once at the agent's start; the all-in-one platform never asks for them.
 */
export function nodeAgentProblems(settings: NodeAgentSettings & Pick<ClusterSettings, 'nodeId'>, hostname: string): string[] {
  const problems: string[] = [];
  if (!settings.nodeId && !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(hostname.toLowerCase())) {
    problems.push(`TIDEPOOL_NODE_ID: unset and the hostname ${JSON.stringify(hostname)} is no node id; set it (lower-case letters, digits, dashes)`);
  }
  const files: ['nodeTlsCert' | 'nodeTlsKey' | 'nodeTlsCa', string][] = [
    ['nodeTlsCert', "the agent's server certificate (PEM), signed by the cluster CA"],
    ['nodeTlsKey', 'its private key (PEM)'],
    ['nodeTlsCa', "the cluster CA (PEM): only clients with a certificate from it are served"],
  ];
  for (const [key, what] of files) {
    const path = settings[key];
    const name = nodeAgentSettings.settings[key].env;
    if (!path) problems.push(`${name}: required for \`tidepool node\`: ${what} (pnpm cluster:local up makes them for the local cluster)`);
    else if (!existsSync(path)) problems.push(`${name}: no such file ${path}`);
  }
  return problems;
}

/** Which addresses sandboxes never reach, and where a sandbox's own egress proxy may be. */
import { Type } from '@sinclair/typebox';
import { integerList, list } from '../../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../../settings/setting.ts';
import { DEFAULT_EGRESS_PROXY_PORTS } from './upstream-address.ts';

const IPV4 = '(25[0-5]|2[0-4]\\d|1?\\d?\\d)(\\.(25[0-5]|2[0-4]\\d|1?\\d?\\d)){3}(/(3[0-2]|[12]?\\d))?';
const IPV6 = '[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*(/(12[0-8]|1[01]\\d|[1-9]?\\d))?';

export const egressSettings = settingsGroup('Sandbox egress', {
  egressProxyAllowedCidrs: setting(Type.Array(Type.String({ pattern: `^${IPV4}$` })), {
    env: 'TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS',
    read: (env) => list(env.TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS),
    default: 'none',
    description:
      'comma-separated IPv4 CIDRs/addresses in private, loopback or link-local ranges where a sandbox\'s own [egress proxy](networking.md#egress-through-your-own-proxy) may nevertheless be (refused by default: the platform dials them from the host)',
    forms: 'a comma list of IPv4 addresses or CIDRs (10.8.0.0/16)',
  }),
  clusterCidrs: setting(Type.Array(Type.String({ pattern: `^((${IPV4})|(${IPV6}))$` })), {
    env: 'TIDEPOOL_CLUSTER_CIDRS',
    read: (env) => list(env.TIDEPOOL_CLUSTER_CIDRS),
    default: 'unset',
    description:
      'comma list of CIDRs of the cluster\'s own machines and services (IPv4 or IPv6), refused to every sandbox like the private ranges, whatever its `allowOut`; the registry, database and node-agent addresses given as IP literals in the settings are refused without it. Set it where the machines have public or otherwise non-private addresses',
    forms: 'a comma list of IPv4 or IPv6 addresses or CIDRs',
  }),
  egressProxyPorts: setting(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { minItems: 1, maxItems: 64 }), {
    env: 'TIDEPOOL_EGRESS_PROXY_PORTS',
    read: (env) => integerList(env.TIDEPOOL_EGRESS_PROXY_PORTS, DEFAULT_EGRESS_PROXY_PORTS),
    default: `\`${DEFAULT_EGRESS_PROXY_PORTS.join(',')}\``,
    description:
      'ports a sandbox\'s own `egressProxy` may be on (the platform dials it from the node, so any port would make the node a port scanner); any other is refused at create and update (400) and at each dial. The cluster\'s own addresses (this machine\'s, the database\'s, the registry\'s, the public and sandbox domains\', node URLs\') are refused whatever the allowed ranges ([Egress through your own proxy](networking.md#egress-through-your-own-proxy))',
    forms: 'a comma list of 1 to 64 ports (1-65535)',
  }),
});

export type EgressSettings = SettingsOf<typeof egressSettings>;

import { iptablesArgsProblem, restorePayloadProblem } from './iptables-commands.ts';
import { type Family, networkOfChain } from './iptables-vocabulary.ts';
import { BodyError, foldFields, isEmpty, isObject, isUnset, optionalString, stringList } from './json-fields.ts';
import { FIREWALL_HELPER_LABEL } from './platform-labels.ts';

/**
 * The one privileged container the platform makes: when it runs in a container itself, it installs the
 * sandbox network's iptables rules through a short-lived helper (apps/api/src/runtime/docker/firewall-commands.ts)
 * in the host's network namespace with NET_ADMIN and the host's root filesystem at /host. Such a container
 * is root on the host, so the gate lets through exactly that shape and only the three scripts the platform
 * runs in it: the host's iptables (or ip6tables) with single-quoted arguments, iptables-restore (ip6tables-restore)
 * fed from $RULES, and reading the host's resolver files. The arguments and the restore payload are parsed and
 * must be ones the platform's firewall writes for that family (iptables-commands.ts).
 */
const IPTABLES_PREFIX: Record<Family, string> = { ipv4: 'exec chroot /host iptables -w ', ipv6: 'exec chroot /host ip6tables -w ' };
const RESTORE_SCRIPT: Record<Family, string> = {
  ipv4: 'printf "%s" "$RULES" | chroot /host iptables-restore -w --noflush',
  ipv6: 'printf "%s" "$RULES" | chroot /host ip6tables-restore -w --noflush',
};
const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];
const HOST_FILE_SCRIPT = /^cat \/host'(?:\/etc\/resolv\.conf|\/run\/systemd\/resolve\/resolv\.conf)' 2>\/dev\/null \|\| true$/;

const TOP_FIELDS = new Set(['image', 'entrypoint', 'cmd', 'env', 'user', 'labels', 'hostconfig', 'name']);
const HOST_FIELDS = new Set(['networkmode', 'capadd', 'binds', 'autoremove']);
const HELPER_CAPS = new Set(['NET_ADMIN', 'NET_RAW']);
const HELPER_BINDS = new Set(['/:/host', '/:/host:ro']);

/** Single-quotes a word the way firewall-commands.ts does (`'` becomes `'\\''`). */
function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The arguments of `exec chroot /host iptables -w '<a>' '<b>' …`, or undefined when the script is not
 * exactly that: the words are read back and must quote again to the very same text, so no other shell
 * syntax (unquoted words, doubled spaces, `$…`, joined quotes) gets through.
 */
export function iptablesScriptArgs(script: string, family: Family = 'ipv4'): string[] | undefined {
  if (!script.startsWith(IPTABLES_PREFIX[family])) return undefined;
  const quoted = script.slice(IPTABLES_PREFIX[family].length);
  const words = [...quoted.matchAll(/'((?:[^']|'\\'')*)'(?: |$)/g)].map((m) => m[1]!.replaceAll(`'\\''`, `'`));
  return words.map(shellQuote).join(' ') === quoted ? words : undefined;
}

export function isFirewallHelperRequest(labels: Record<string, unknown>): boolean {
  return FIREWALL_HELPER_LABEL in labels;
}

/** Undefined when `body` is the platform's firewall helper as it makes it; otherwise why not. */
export function firewallHelperProblem(body: unknown, helperImage: string): string | undefined {
  try {
    const top = foldFields(body, 'body');
    for (const [key, value] of top) if (!TOP_FIELDS.has(key) && !isUnset(value)) return `the firewall helper container sets no field ${key}`;
    const labels = top.get('labels');
    if (!isObject(labels) || labels[FIREWALL_HELPER_LABEL] !== 'true') return `${FIREWALL_HELPER_LABEL} must be "true"`;
    if (optionalString(top.get('image'), 'Image') !== helperImage) return `the firewall helper container runs only the helper image ${helperImage}`;
    if (optionalString(top.get('user'), 'User') !== '0') return 'the firewall helper container runs as user 0';
    if (stringList(top.get('cmd'), 'Cmd').length > 0) return 'the firewall helper container has no Cmd';
    const entrypoint = stringList(top.get('entrypoint'), 'Entrypoint');
    if (entrypoint.length !== 3 || entrypoint[0] !== '/bin/sh' || entrypoint[1] !== '-c') return 'the firewall helper container runs /bin/sh -c <script>';
    const script = entrypoint[2]!;
    const env = stringList(top.get('env'), 'Env');
    const restoreFamily = FAMILIES.find((family) => script === RESTORE_SCRIPT[family]);
    const argsFamily = FAMILIES.find((family) => iptablesScriptArgs(script, family) !== undefined);
    if (restoreFamily) {
      const program = restoreFamily === 'ipv4' ? 'iptables-restore' : 'ip6tables-restore';
      if (env.length !== 1 || !env[0]!.startsWith('RULES=')) return `${program} in the firewall helper takes exactly one variable, RULES`;
      const problem = restorePayloadProblem(env[0]!.slice('RULES='.length), restoreFamily);
      if (problem) return `${program}: ${problem}`;
    } else if (argsFamily !== undefined || HOST_FILE_SCRIPT.test(script)) {
      if (env.length > 0) return 'this firewall helper script takes no environment';
      const problem = argsFamily && iptablesArgsProblem(iptablesScriptArgs(script, argsFamily)!, argsFamily);
      if (problem) return `${argsFamily === 'ipv4' ? 'iptables' : 'ip6tables'}: ${problem}`;
    } else {
      return 'the firewall helper container runs only iptables, ip6tables, their restore or reads the host resolver files';
    }
    const host = foldFields(top.get('hostconfig'), 'HostConfig');
    for (const [key, value] of host) if (!HOST_FIELDS.has(key) && !isUnset(value)) return `the firewall helper container sets no HostConfig.${key}`;
    if (host.get('networkmode') !== 'host') return 'the firewall helper container uses the host network';
    if (!isEmpty(host.get('autoremove'))) return 'the firewall helper container is removed by the platform (no AutoRemove)';
    const caps = stringList(host.get('capadd'), 'HostConfig.CapAdd').map((c) => c.toUpperCase().replace(/^CAP_/, ''));
    if (caps.some((c) => !HELPER_CAPS.has(c))) return 'the firewall helper container adds only NET_ADMIN and NET_RAW';
    const binds = stringList(host.get('binds'), 'HostConfig.Binds');
    if (binds.length !== 1 || !HELPER_BINDS.has(binds[0]!)) return 'the firewall helper container binds only the host root at /host';
    return undefined;
  } catch (error) {
    if (error instanceof BodyError) return error.message;
    throw error;
  }
}

/**
 * The network (12 hex digits of its id) whose hook an admitted helper body inserts into a built-in chain
 * (`iptables -I <builtin> 1 -i br-<id12> … -j TP-…-<id12>`), or undefined for any other script. The gate looks
 * that network up: a hook goes in only for the platform's own networks, so no other network's traffic (compose's
 * gate network, another project's) is sent through the platform's chains. Deleting a hook needs no lookup: a
 * stale one's network may be gone.
 */
export function insertedHookNetwork(body: unknown): string | undefined {
  if (!isObject(body)) return undefined;
  const entrypoint = foldFields(body, 'body').get('entrypoint');
  const script = Array.isArray(entrypoint) && typeof entrypoint[2] === 'string' ? entrypoint[2] : '';
  const args = FAMILIES.map((family) => iptablesScriptArgs(script, family)).find((found) => found !== undefined);
  if (args === undefined) return undefined;
  const command = args[0] === '-t' ? args[2] : args[0];
  const target = args[args.indexOf('-j') + 1];
  return command === '-I' && args.includes('-j') ? networkOfChain(target) : undefined;
}

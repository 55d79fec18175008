import { bindSourceProblem } from './bind-roots.ts';
import { firewallHelperProblem, isFirewallHelperRequest } from './firewall-helper-shape.ts';
import { BodyError, foldFields, isEmpty, isObject, isUnset, optionalString, stringList } from './json-fields.ts';
import { isPlatformContainer } from './platform-labels.ts';

export interface CreatePolicySettings {
  /** Host directories whose volume directories bind mounts may come from (sandbox volumes); none by default. */
  bindRoots: readonly string[];
  /** Image of the platform's firewall helper container (the platform's base image). */
  helperImage: string;
  /** OCI runtimes a container may ask for ('' = the engine's default is always allowed). */
  runtimes: readonly string[];
}

/**
 * Capabilities the platform gives sandboxes and build containers (apps/api/src/runtime/docker/container-hardening.ts,
 * KEPT_CAPABILITIES): Docker's default set minus NET_RAW and MKNOD. Nothing else may be added.
 */
export const SANDBOX_CAPABILITIES = new Set([
  'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP', 'SETFCAP', 'NET_BIND_SERVICE', 'SYS_CHROOT', 'AUDIT_WRITE',
]);

/**
 * Top-level fields of a create body (Go's container.Config plus the HostConfig and NetworkingConfig
 * wrappers). Anything else is refused when set: the engine also reads HostConfig fields placed at the top
 * level when there is no HostConfig object (`{"Image": …, "Privileged": true}`), and unknown fields may be
 * privileges of a newer engine.
 */
const TOP_FIELDS = new Set([
  'hostname', 'domainname', 'user', 'attachstdin', 'attachstdout', 'attachstderr', 'exposedports', 'tty', 'openstdin', 'stdinonce',
  'env', 'cmd', 'healthcheck', 'argsescaped', 'image', 'volumes', 'workingdir', 'entrypoint', 'networkdisabled', 'macaddress',
  'onbuild', 'labels', 'stopsignal', 'stoptimeout', 'shell', 'hostconfig', 'networkingconfig',
  // dockerode repeats the query parameters in the body; the engine ignores them there.
  'name', 'platform',
]);

/** HostConfig fields that grant nothing beyond the container's own limits; the checked ones are listed below. */
const PLAIN_HOST_FIELDS = new Set([
  'nanocpus', 'cpushares', 'cpuperiod', 'cpuquota', 'cpusetcpus', 'cpusetmems', 'memory', 'memoryswap', 'memoryreservation',
  'memoryswappiness', 'kernelmemory', 'oomkilldisable', 'pidslimit', 'ulimits', 'capdrop', 'restartpolicy', 'autoremove', 'init',
  'shmsize', 'tmpfs', 'dns', 'dnsoptions', 'dnssearch', 'extrahosts', 'readonlyrootfs', 'storageopt', 'groupadd', 'oomscoreadj',
  'blkioweight', 'consolesize', 'isolation',
]);
const CHECKED_HOST_FIELDS = new Set([
  'networkmode', 'capadd', 'binds', 'mounts', 'runtime', 'securityopt', 'logconfig', 'ipcmode', 'cgroupnsmode', 'pidmode', 'utsmode', 'usernsmode',
]);

/** NetworkMode values that put a container on the engine's default bridge. */
const DEFAULT_BRIDGE_MODES = new Set(['', 'default', 'bridge']);

const BIND_OPTIONS = new Set(['ro', 'rw', 'z', 'Z', 'nocopy', 'private', 'rprivate']);
const LOG_DRIVERS = new Set(['', 'json-file', 'local', 'none']);

export class CreateRefused extends Error {}

function refuse(message: string): never {
  throw new CreateRefused(message);
}

function namespaceMode(host: Map<string, unknown>, field: string, name: string, allowed: string[]): void {
  const mode = optionalString(host.get(field), `HostConfig.${name}`);
  if (!allowed.includes(mode)) refuse(`HostConfig.${name} '${mode}' is not allowed (the host's or another container's namespaces)`);
}

function checkBindSource(source: string, what: string, settings: CreatePolicySettings): void {
  if (!source.startsWith('/')) refuse(`${what}: named volumes are not allowed, only host directories under the allowed bind roots`);
  if (settings.bindRoots.length === 0) refuse(`${what}: bind mounts are not allowed (no DOCKER_GATE_ALLOWED_BIND_ROOTS)`);
  const problem = bindSourceProblem(source, settings.bindRoots);
  if (problem) refuse(`${what}: ${problem}`);
}

function checkBinds(value: unknown, settings: CreatePolicySettings): void {
  for (const bind of stringList(value, 'HostConfig.Binds')) {
    const parts = bind.split(':');
    if (parts.length < 2 || parts.length > 3) refuse(`bind '${bind}' is malformed`);
    checkBindSource(parts[0]!, `bind '${bind}'`, settings);
    for (const option of (parts[2] ?? '').split(',').filter(Boolean)) {
      if (!BIND_OPTIONS.has(option)) refuse(`bind '${bind}': option '${option}' is not allowed`);
    }
  }
}

function checkMounts(value: unknown, settings: CreatePolicySettings): void {
  if (value === undefined || value === null) return;
  if (!Array.isArray(value)) refuse('HostConfig.Mounts must be a list');
  for (const [index, raw] of value.entries()) {
    const mount = foldFields(raw, `HostConfig.Mounts[${index}]`);
    const type = optionalString(mount.get('type'), 'Mount.Type');
    if (type === 'tmpfs') continue;
    if (type !== 'bind') refuse(`mount of type '${type}' is not allowed (only bind mounts under the allowed roots and tmpfs)`);
    checkBindSource(optionalString(mount.get('source'), 'Mount.Source'), `mount ${index}`, settings);
    const options = foldFields(mount.get('bindoptions'), 'Mount.BindOptions');
    const propagation = optionalString(options.get('propagation'), 'Mount.BindOptions.Propagation');
    if (!['', 'private', 'rprivate'].includes(propagation)) refuse(`mount ${index}: propagation '${propagation}' is not allowed`);
    if (!isEmpty(mount.get('volumeoptions'))) refuse(`mount ${index}: volume options are not allowed`);
  }
}

/** Endpoints of NetworkingConfig.EndpointsConfig by network name (an object of objects). */
function endpointsOf(top: Map<string, unknown>): Record<string, unknown> {
  const networking = foldFields(top.get('networkingconfig'), 'NetworkingConfig');
  const endpoints = networking.get('endpointsconfig');
  if (endpoints !== undefined && endpoints !== null && !isObject(endpoints)) refuse('NetworkingConfig.EndpointsConfig must be an object');
  return (endpoints ?? {}) as Record<string, unknown>;
}

/**
 * A container joins no network or the platform's sandbox networks (which ones is read from the engine:
 * joinedNetworks, networkJoinProblem), never the host's, another container's or the engine's default bridge,
 * and its endpoints carry no settings: the platform sets none, and aliases, links, addresses or driver options
 * would give it other containers' DNS names or addresses on a shared network.
 */
function checkNetworks(host: Map<string, unknown>, top: Map<string, unknown>): void {
  const mode = optionalString(host.get('networkmode'), 'HostConfig.NetworkMode');
  if (mode === 'host' || mode.startsWith('container:')) refuse(`HostConfig.NetworkMode '${mode}' is not allowed`);
  if (DEFAULT_BRIDGE_MODES.has(mode)) refuse(`HostConfig.NetworkMode '${mode}' is the engine's default bridge, not a network of the platform (none or a sandbox network)`);
  for (const [name, settings] of Object.entries(endpointsOf(top))) {
    if (name === 'host' || name.startsWith('container:') || DEFAULT_BRIDGE_MODES.has(name)) refuse(`network '${name}' is not allowed`);
    for (const [key, value] of foldFields(settings, `NetworkingConfig.EndpointsConfig.${name}`)) {
      if (!isEmpty(value)) refuse(`network '${name}': endpoint setting ${key} is not allowed (no aliases, links, addresses or driver options)`);
    }
  }
}

function checkHostConfig(host: Map<string, unknown>, top: Map<string, unknown>, settings: CreatePolicySettings): void {
  for (const [key, value] of host) {
    if (!PLAIN_HOST_FIELDS.has(key) && !CHECKED_HOST_FIELDS.has(key) && !isUnset(value)) refuse(`HostConfig.${key} is not allowed`);
  }
  checkNetworks(host, top);
  const added = stringList(host.get('capadd'), 'HostConfig.CapAdd').map((c) => c.toUpperCase().replace(/^CAP_/, ''));
  const extra = added.filter((c) => !SANDBOX_CAPABILITIES.has(c));
  if (extra.length > 0) refuse(`capabilities ${extra.join(', ')} are not allowed`);
  checkBinds(host.get('binds'), settings);
  checkMounts(host.get('mounts'), settings);
  const runtime = optionalString(host.get('runtime'), 'HostConfig.Runtime');
  if (runtime && !settings.runtimes.includes(runtime)) refuse(`runtime '${runtime}' is not allowed`);
  for (const option of stringList(host.get('securityopt'), 'HostConfig.SecurityOpt')) {
    if (!/^no-new-privileges(?:[:=]true)?$/.test(option)) refuse(`security option '${option}' is not allowed`);
  }
  const log = foldFields(host.get('logconfig'), 'HostConfig.LogConfig');
  if (!LOG_DRIVERS.has(optionalString(log.get('type'), 'LogConfig.Type'))) refuse('only the json-file, local and none log drivers are allowed');
  namespaceMode(host, 'ipcmode', 'IpcMode', ['', 'private', 'none', 'shareable']);
  namespaceMode(host, 'cgroupnsmode', 'CgroupnsMode', ['', 'private']);
  namespaceMode(host, 'pidmode', 'PidMode', ['']);
  namespaceMode(host, 'utsmode', 'UTSMode', ['']);
  namespaceMode(host, 'usernsmode', 'UsernsMode', ['']);
}

/**
 * Decides a `POST /containers/create` body: undefined when the platform could have sent it, else the
 * reason for refusing it. Only containers labelled as the platform's are created; none is privileged,
 * shares the host's PID/IPC/UTS/user namespaces or network, maps devices, adds capabilities beyond the
 * sandbox set, publishes ports or binds host paths outside the allowed roots, except the firewall helper
 * in exactly the shape the platform makes it.
 */
export function containerCreateProblem(body: unknown, settings: CreatePolicySettings): string | undefined {
  try {
    if (!isObject(body)) refuse('the body must be a JSON object');
    const top = foldFields(body, 'body');
    for (const [key, value] of top) if (!TOP_FIELDS.has(key) && !isUnset(value)) refuse(`field ${key} is not allowed at the top level`);
    const labels = top.get('labels');
    if (labels !== undefined && labels !== null && !isObject(labels)) refuse('Labels must be an object');
    const labelMap = (labels ?? {}) as Record<string, unknown>;
    if (isFirewallHelperRequest(labelMap)) {
      const problem = firewallHelperProblem(body, settings.helperImage);
      return problem === undefined ? undefined : `firewall helper refused: ${problem}`;
    }
    if (!isPlatformContainer(labelMap)) refuse('only containers carrying the platform labels (dev.tidepool.platform-id …) may be created');
    if (!optionalString(top.get('image'), 'Image')) refuse('Image is required');
    checkHostConfig(foldFields(top.get('hostconfig'), 'HostConfig'), top, settings);
    return undefined;
  } catch (error) {
    if (error instanceof CreateRefused || error instanceof BodyError) return error.message;
    throw error;
  }
}

/**
 * The networks a create body (already admitted by containerCreateProblem) joins by name or id: its NetworkMode
 * other than none, and its endpoints. The firewall helper's host network is its own exact shape, not listed.
 */
export function joinedNetworks(body: unknown): string[] {
  if (!isObject(body)) return [];
  const top = foldFields(body, 'body');
  const labels = top.get('labels');
  if (isObject(labels) && isFirewallHelperRequest(labels)) return [];
  const mode = optionalString(foldFields(top.get('hostconfig'), 'HostConfig').get('networkmode'), 'HostConfig.NetworkMode');
  const names = new Set([mode, ...Object.keys(endpointsOf(top))]);
  names.delete('none');
  return [...names];
}

/** What the engine says about a network a container would join. */
export interface NetworkFacts {
  name: string;
  /** Made by the platform (dev.tidepool.managed=true). */
  managed: boolean;
}

/** Why a container may not join the network `ref`: only networks the platform made, or named in `joinable` (compose's sandbox network). */
export function networkJoinProblem(ref: string, network: NetworkFacts, joinable: readonly string[]): string | undefined {
  if (network.managed || joinable.includes(network.name)) return undefined;
  return `network ${ref} (${network.name}) is not a Tidepool platform network (labelled dev.tidepool.managed=true, or one of ${joinable.join(', ') || 'no other names'})`;
}

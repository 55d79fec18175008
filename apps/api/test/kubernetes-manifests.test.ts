/**
 * deploy/kubernetes, checked OFFLINE: no Kubernetes API server runs where Tidepool is tested (the Swarm stack is the
 * deployment tested on real engines). Every overlay under deploy/kubernetes/overlays is rendered by
 * `kubectl kustomize` (from a copy with placeholder files where the operator's secrets go), and every object it
 * prints is validated against the official Kubernetes schemas (`kubernetes-models`: the OpenAPI validators, and the
 * generated types for unknown fields), then checked for what schemas cannot see (support/kube-manifest-check.ts)
 * and for what Tidepool's cluster mode needs (tidepoolProblems below). Broken copies prove each check can fail.
 * What this cannot prove: that a cluster schedules the pods, that an agent reaches its engine, that images start.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { repoRoot, run } from '@tidepool/testkit';
import { loadConfig, settingEnvNames } from '../src/config.ts';
import { type KubeObject, checkManifests, environmentOf, objectId, schemaProblems, unknownFieldProblems, workloadsOf } from './support/kube-manifest-check.ts';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are plain JSON */
type Any = any;

const dir = join(repoRoot(), 'deploy/kubernetes');
const work = mkdtempSync(join(tmpdir(), 'tp-kube-'));
const overlays = readdirSync(join(dir, 'overlays')).filter((name) => statSync(join(dir, 'overlays', name)).isDirectory()).sort();

const options = {
  knownSettings: settingEnvNames(),
  imagePrefixes: ['registry.example.com/tidepool-cluster/'],
  // The ingress certificate is the operator's (a wildcard certificate, e.g. from cert-manager with a DNS-01 issuer).
  externalSecrets: ['tidepool/tidepool-ingress-tls'],
};

/** Settings a node agent refuses to start with (a node holds no cluster secrets: docs/configuration.md, TIDEPOOL_NODES). */
const NODE_REFUSED = ['TIDEPOOL_DATABASE_URL', 'TIDEPOOL_DATABASE_PASSWORD_FILE', 'TIDEPOOL_SECRETS_KEY', 'TIDEPOOL_SECRETS_KEY_FILE', 'TIDEPOOL_TOKEN_SEED_FILE', 'TIDEPOOL_ADMIN_KEY', 'TIDEPOOL_ADMIN_KEY_FILE', 'TIDEPOOL_API_KEYS', 'TIDEPOOL_API_KEYS_FILE'];
/** The taint dedicated sandbox machines carry (deploy/kubernetes/README.md). */
const SANDBOX_TAINT = 'tidepool.dev/sandboxes';

/** The files an overlay's generators read (`key=path` or `path`), relative to the overlay. */
function generatorFiles(overlay: string): string[] {
  const kustomization = parse(readFileSync(join(dir, 'overlays', overlay, 'kustomization.yaml'), 'utf8')) as Any;
  const generators = [...(kustomization.secretGenerator ?? []), ...(kustomization.configMapGenerator ?? [])];
  return [...new Set(generators.flatMap((g: Any) => (g.files ?? []).map((f: string) => f.slice(f.indexOf('=') + 1))))] as string[];
}

/** A copy of deploy/kubernetes with placeholder files where an operator puts the overlay's secrets. */
function copyWithFiles(name: string, overlay: string): string {
  const copy = join(work, name);
  rmSync(copy, { recursive: true, force: true });
  cpSync(dir, copy, { recursive: true });
  for (const file of generatorFiles(overlay)) {
    const path = join(copy, 'overlays', overlay, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, file.endsWith('.json') ? '{"auths":{}}\n' : `placeholder for ${file}\n`);
  }
  return copy;
}

async function kustomize(path: string): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return run('kubectl', ['kustomize', path], { timeoutMs: 60_000 });
}

async function render(overlay: string): Promise<KubeObject[]> {
  const copy = copyWithFiles(`render-${overlay}`, overlay);
  const res = await kustomize(join(copy, 'overlays', overlay));
  if (res.exitCode !== 0) throw new Error(`kubectl kustomize overlays/${overlay} failed: ${res.stderr}`);
  const documents = parseAllDocuments(res.stdout);
  for (const document of documents) if (document.errors.length > 0) throw new Error(`overlays/${overlay}: ${document.errors[0]!.message}`);
  return documents.map((d) => d.toJS() as KubeObject);
}

function find(objects: KubeObject[], kind: string, name: string): Any {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`${kind}/${name} not rendered`);
  return found;
}

function container(objects: KubeObject[], kind: string, name: string): Any {
  return find(objects, kind, name).spec.template.spec.containers[0];
}

function setting(objects: KubeObject[], kind: string, name: string, setting: string): string | undefined {
  const workload = find(objects, kind, name);
  return environmentOf(objects, workload.metadata.namespace, workload.spec.template.spec.containers[0]).get(setting)?.value;
}

/** Sample content for a file a setting names, of the shape the platform expects. */
function sampleFile(name: string): string {
  if (name === 'TIDEPOOL_API_KEYS_FILE') return `e2b_${randomBytes(20).toString('hex')}\n`;
  if (name === 'TIDEPOOL_ADMIN_KEY_FILE') return `${randomBytes(24).toString('hex')}\n`;
  if (name === 'TIDEPOOL_SECRETS_KEY_FILE') return `${randomBytes(32).toString('base64')}\n`;
  if (name.endsWith('PASSWORD_FILE')) return 'sample-password\n';
  return 'placeholder\n';
}

/**
 * The environment a workload's first container starts with, as the platform's own loadConfig reads it: ConfigMap
 * and env values, field references as a scheduled pod would have them, `$(VAR)` expanded, and every file a setting
 * names replaced by a sample file of the right shape (the real ones are the operator's).
 */
function startEnvironment(objects: KubeObject[], kind: string, name: string, files: string): NodeJS.ProcessEnv {
  const workload = find(objects, kind, name);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, entry] of environmentOf(objects, workload.metadata.namespace, workload.spec.template.spec.containers[0])) {
    const field = entry.valueFrom?.fieldRef?.fieldPath;
    const value = field === 'spec.nodeName' ? 'sandbox-machine-1' : field === 'status.hostIP' ? '192.0.2.10' : entry.value;
    if (value === undefined) throw new Error(`${kind}/${name}: ${key} has no value the offline check can stand in for`);
    env[key] = value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (_, ref: string) => env[ref] ?? '');
  }
  for (const key of Object.keys(env)) {
    if (!key.endsWith('_FILE') && !/^TIDEPOOL_(CLUSTER_CLIENT_(CERT|KEY)|CLUSTER_CA|NODE_TLS_(CERT|KEY|CA))$/.test(key)) continue;
    const path = join(files, `${name}-${key}`);
    writeFileSync(path, sampleFile(key));
    env[key] = path;
  }
  return env;
}

/** What Tidepool's cluster mode needs of a deployment, beyond what Kubernetes itself checks. */
function tidepoolProblems(objects: KubeObject[]): string[] {
  const problems: string[] = [];
  const api = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tidepool-api') as Any;
  const agent = objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'tidepool-node-agent') as Any;
  if (!api || !agent) return ['the API Deployment tidepool-api or the node-agent DaemonSet tidepool-node-agent is missing'];
  const apiEnv = environmentOf(objects, api.metadata.namespace, api.spec.template.spec.containers[0]);
  const agentEnv = environmentOf(objects, agent.metadata.namespace, agent.spec.template.spec.containers[0]);
  const apiValue = (name: string): string | undefined => apiEnv.get(name)?.value;
  const agentValue = (name: string): string | undefined => agentEnv.get(name)?.value;

  // The API: engine-free, in a namespace of its own that enforces `restricted`, sharing keys, reaching PostgreSQL
  // over TLS and the agents through a headless Service.
  const apiNamespace = objects.find((o) => o.kind === 'Namespace' && o.metadata.name === api.metadata.namespace);
  if (apiNamespace?.metadata.labels?.['pod-security.kubernetes.io/enforce'] !== 'restricted') problems.push(`the API's namespace ${api.metadata.namespace} does not enforce the restricted Pod Security level`);
  if (agent.metadata.namespace === api.metadata.namespace) problems.push('the node agents share the API namespace: they need privileges the API namespace must refuse');
  if (apiValue('TIDEPOOL_EMBEDDED_NODE') !== 'off') problems.push('tidepool-api: TIDEPOOL_EMBEDDED_NODE is not off (the API pods have no engine)');
  for (const name of ['TIDEPOOL_API_KEYS_FILE', 'TIDEPOOL_ADMIN_KEY_FILE', 'TIDEPOOL_SECRETS_KEY_FILE', 'TIDEPOOL_DATABASE_PASSWORD_FILE']) if (!apiValue(name)) problems.push(`tidepool-api: ${name} is not set (every replica must share it)`);
  const database = apiValue('TIDEPOOL_DATABASE_URL') ?? '';
  if (!/^postgres(ql)?:\/\//.test(database)) problems.push('tidepool-api: TIDEPOOL_DATABASE_URL is not a PostgreSQL URL');
  else if (!/[?&]sslmode=(require|verify-ca|verify-full)(&|$)/.test(database)) problems.push('tidepool-api: TIDEPOOL_DATABASE_URL does not require TLS (sslmode=require)');
  const nodes = (apiValue('TIDEPOOL_NODES') ?? '').split(',').filter(Boolean);
  if (nodes.length === 0) problems.push('tidepool-api: TIDEPOOL_NODES is not set');
  for (const entry of nodes) {
    const url = new URL(entry);
    const [name, namespace, svc] = url.hostname.split('.');
    const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === name && o.metadata.namespace === namespace) as Any;
    if (svc !== 'svc' || !service) problems.push(`tidepool-api: TIDEPOOL_NODES entry ${entry} is not a Service of the manifests (<name>.<namespace>.svc)`);
    else if (service.spec.clusterIP !== 'None') problems.push(`tidepool-api: TIDEPOOL_NODES entry ${entry}: Service ${namespace}/${name} is not headless (one address per agent needs clusterIP: None)`);
    else if (!(service.spec.ports ?? []).some((p: Any) => String(p.port) === url.port)) problems.push(`tidepool-api: TIDEPOOL_NODES entry ${entry}: Service ${namespace}/${name} has no port ${url.port}`);
    else if (!Object.entries(service.spec.selector ?? {}).every(([k, v]) => agent.spec.template.metadata.labels?.[k] === v)) problems.push(`tidepool-api: TIDEPOOL_NODES entry ${entry}: Service ${namespace}/${name} does not select the node agents`);
  }
  if ((api.spec.replicas ?? 1) < 2) problems.push('tidepool-api: fewer than two replicas');
  if (!(api.spec.template.spec.topologySpreadConstraints ?? []).some((c: Any) => c.topologyKey === 'kubernetes.io/hostname')) problems.push('tidepool-api: no topology spread over machines (kubernetes.io/hostname)');
  const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget' && o.metadata.namespace === api.metadata.namespace && Object.entries((o as Any).spec?.selector?.matchLabels ?? {}).every(([k, v]) => api.spec.template.metadata.labels?.[k] === v));
  if (!pdb) problems.push('tidepool-api: no PodDisruptionBudget');

  // The agent: the machine's engine, isolation required, no cluster secrets, on dedicated (tainted) machines.
  if (agentValue('TIDEPOOL_SANDBOX_ISOLATION') !== 'require') problems.push('tidepool-node-agent: TIDEPOOL_SANDBOX_ISOLATION is not require');
  for (const name of NODE_REFUSED) if (agentEnv.has(name)) problems.push(`tidepool-node-agent: ${name} is set: a node holds no cluster secrets and refuses to start with it`);
  if (agentEnv.get('TIDEPOOL_NODE_ID')?.valueFrom?.fieldRef?.fieldPath !== 'spec.nodeName') problems.push('tidepool-node-agent: TIDEPOOL_NODE_ID is not the node name (it must stay the same when the pod is replaced)');
  const caps: string[] = agent.spec.template.spec.containers[0].securityContext?.capabilities?.add ?? [];
  if (!caps.includes('NET_ADMIN')) problems.push('tidepool-node-agent: no NET_ADMIN: it cannot install its sandboxes\' isolation rules');
  if (agent.spec.template.spec.hostNetwork !== true) problems.push('tidepool-node-agent: not on the host network');
  if (!(agent.spec.template.spec.tolerations ?? []).some((t: Any) => t.key === SANDBOX_TAINT && t.effect === 'NoSchedule')) problems.push(`tidepool-node-agent: does not tolerate the dedicated machines' taint ${SANDBOX_TAINT}`);

  // Both sides agree on the domain and the registry; the registry is authenticated on both.
  for (const name of ['TIDEPOOL_DOMAIN', 'TIDEPOOL_REGISTRY', 'TIDEPOOL_BASE_IMAGE', 'TIDEPOOL_RUNTIME_IMAGE', 'TIDEPOOL_CODE_INTERPRETER_IMAGE']) {
    if (!apiValue(name)) problems.push(`tidepool-api: ${name} is not set`);
    else if (apiValue(name) !== agentValue(name)) problems.push(`${name} differs between the API (${apiValue(name)}) and the node agents (${agentValue(name)})`);
  }
  for (const [who, value] of [['tidepool-api', apiValue], ['tidepool-node-agent', agentValue]] as const) {
    if (!value('TIDEPOOL_REGISTRY_USERNAME') || !value('TIDEPOOL_REGISTRY_PASSWORD_FILE')) problems.push(`${who}: the registry has no user and password file`);
    if (value('TIDEPOOL_REGISTRY_INSECURE') === 'on' || value('TIDEPOOL_REGISTRY_INSECURE') === 'true') problems.push(`${who}: the registry is reached without TLS`);
  }

  // The ingress: the API host and the wildcard sandbox host, streams open for at least the proxy's idle timeout.
  const domain = apiValue('TIDEPOOL_DOMAIN');
  const ingresses = objects.filter((o) => o.kind === 'Ingress') as Any[];
  if (ingresses.length === 0) problems.push('no Ingress');
  for (const ingress of ingresses) {
    const hosts = (ingress.spec.rules ?? []).map((r: Any) => r.host);
    for (const host of [`api.${domain}`, `*.${domain}`]) if (!hosts.includes(host)) problems.push(`${objectId(ingress)}: no rule for ${host}`);
    for (const annotation of ['nginx.ingress.kubernetes.io/proxy-read-timeout', 'nginx.ingress.kubernetes.io/proxy-send-timeout']) {
      const seconds = Number(ingress.metadata.annotations?.[annotation]);
      if (!(seconds >= 620)) problems.push(`${objectId(ingress)}: ${annotation} is ${ingress.metadata.annotations?.[annotation] ?? 'unset'}, below 620 s (streams would be cut)`);
    }
    const tlsHosts = (ingress.spec.tls ?? []).flatMap((t: Any) => t.hosts ?? []);
    for (const host of hosts) if (!tlsHosts.includes(host)) problems.push(`${objectId(ingress)}: ${host} is served without TLS`);
  }
  return problems;
}

/** Every problem the three layers find (schemas, references and safety, Tidepool's needs); unknown fields aside. */
async function allProblems(objects: KubeObject[]): Promise<string[]> {
  return [...(await schemaProblems(objects)), ...checkManifests(objects, options), ...tidepoolProblems(objects)];
}

const rendered = new Map<string, KubeObject[]>();

beforeAll(async () => {
  const version = await run('kubectl', ['version', '--client'], { timeoutMs: 20_000 }).catch((error: Error) => ({ exitCode: 1, stdout: '', stderr: error.message }));
  const kustomizeMajor = Number(/Kustomize Version: v(\d+)/.exec(version.stdout)?.[1] ?? 0);
  if (version.exitCode !== 0 || kustomizeMajor < 5) {
    throw new Error(`these checks render with \`kubectl kustomize\` and need kubectl 1.27 or newer (kustomize v5): ${version.exitCode !== 0 ? version.stderr : version.stdout}`);
  }
  for (const overlay of overlays) rendered.set(overlay, await render(overlay));
}, 180_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('deploy/kubernetes (offline: rendered by kubectl kustomize and schema-checked, never applied to a cluster)', () => {
  it('has the three overlays the README describes', () => {
    expect(overlays).toEqual(['cert-manager', 'in-cluster-registry', 'production']);
    const readme = readFileSync(join(dir, 'README.md'), 'utf8');
    for (const overlay of overlays) expect(readme).toContain(`overlays/${overlay}`);
  });

  it.each(overlays)('overlays/%s: every object passes the official schema, the reference and safety checks and what cluster mode needs', async (overlay) => {
    const objects = rendered.get(overlay)!;
    const kinds = new Set(objects.map((o) => o.kind));
    for (const kind of ['Namespace', 'ServiceAccount', 'ConfigMap', 'Secret', 'Service', 'Deployment', 'DaemonSet', 'PodDisruptionBudget', 'Ingress']) expect(kinds, kind).toContain(kind);
    expect(await allProblems(objects)).toEqual([]);
  });

  it.each(overlays)('overlays/%s: the API\'s and the agent\'s settings pass the platform\'s own validation (loadConfig)', (overlay) => {
    const objects = rendered.get(overlay)!;
    const files = mkdtempSync(join(work, `config-${overlay}-`));
    const api = loadConfig(startEnvironment(objects, 'Deployment', 'tidepool-api', files));
    expect(api.embeddedNode).toBe(false);
    expect(api.databaseUrl).toMatch(/sslmode=require/);
    const agent = loadConfig(startEnvironment(objects, 'DaemonSet', 'tidepool-node-agent', files));
    expect(agent.nodeId).toBe('sandbox-machine-1');
    expect(agent.nodeUrl).toBe('https://192.0.2.10:7443');
    expect(agent.sandboxIsolation).toBe('require');
    expect(agent.registry).toBe(api.registry);
    // The same path refuses a bad value, naming the setting.
    const broken = structuredClone(objects) as Any[];
    find(broken, 'ConfigMap', 'tidepool-api-settings').data.TIDEPOOL_DATABASE_URL = 'mysql://tidepool@db.example.com/tidepool';
    expect(() => loadConfig(startEnvironment(broken, 'Deployment', 'tidepool-api', files))).toThrow(/TIDEPOOL_DATABASE_URL/);
  });

  it('no object of any overlay has a field its kind does not define (the generated types, strict like an API server)', () => {
    const all = [...rendered.values()].flat();
    // One broken object among them proves the check sees a misspelt field, and names the object.
    const broken = structuredClone(find(rendered.get('production')!, 'Deployment', 'tidepool-api'));
    broken.metadata.name = 'misspelt';
    broken.spec.template.spec.containers[0].imagePullPolicyy = 'Always';
    const problems = unknownFieldProblems([...all, broken]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^Deployment\/tidepool\/misspelt: unknown field 'imagePullPolicyy'/);
  }, 120_000);

  it('the API runs engine-free and unprivileged, with its secrets as files it can read; the agent runs with the engine on the host network', () => {
    const objects = rendered.get('production')!;
    const api = container(objects, 'Deployment', 'tidepool-api');
    const apiPod = find(objects, 'Deployment', 'tidepool-api').spec.template.spec;
    expect([...api.command, ...api.args]).toEqual(['tidepool', 'api']);
    expect(api.image).toBe('registry.example.com/tidepool-cluster/api:latest');
    expect(setting(objects, 'Deployment', 'tidepool-api', 'TIDEPOOL_EMBEDDED_NODE')).toBe('off');
    expect(apiPod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    // 0440 with the pod's fsGroup: the files are group 1000, the API's group.
    expect(apiPod.volumes.find((v: Any) => v.name === 'secrets').secret.defaultMode).toBe(0o440);
    expect(JSON.stringify(api.env)).not.toMatch(/secretKeyRef/);

    const agent = container(objects, 'DaemonSet', 'tidepool-node-agent');
    const agentPod = find(objects, 'DaemonSet', 'tidepool-node-agent').spec.template.spec;
    expect([...agent.command, ...agent.args]).toEqual(['tidepool', 'node']);
    expect(agentPod.hostNetwork).toBe(true);
    expect(agentPod.volumes.find((v: Any) => v.name === 'docker-socket').hostPath).toEqual({ path: '/var/run/docker.sock', type: 'Socket' });
    expect(agentPod.volumes.find((v: Any) => v.name === 'node-tls').hostPath).toEqual({ path: '/etc/tidepool/node-tls', type: 'Directory' });
    expect(agent.securityContext.privileged).toBeUndefined();
    expect(agent.securityContext.capabilities).toEqual({ drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] });
    expect(find(objects, 'Namespace', 'tidepool-nodes').metadata.labels['pod-security.kubernetes.io/enforce']).toBe('privileged');

    const csi = find(rendered.get('cert-manager')!, 'Deployment', 'tidepool-api').spec.template.spec.volumes.find((v: Any) => v.name === 'cluster-tls').csi;
    expect(csi.driver).toBe('csi.cert-manager.io');
    expect(csi.volumeAttributes['csi.cert-manager.io/fs-group']).toBe('1000');
  });

  it('kubectl kustomize refuses to render while a secret file is missing, naming it', async () => {
    const copy = copyWithFiles('missing', 'production');
    rmSync(join(copy, 'overlays/production/secrets/secrets-key'));
    const res = await kustomize(join(copy, 'overlays/production'));
    expect(res.exitCode).not.toBe(0);
    expect(res.stderr).toMatch(/secrets-key/);
  });

  /** Each mutation breaks one thing a check is for; the checks must name it. */
  const mutations: [string, string, (objects: Any[]) => void, RegExp][] = [
    ['production', 'a replica count of the wrong type', (o) => (find(o, 'Deployment', 'tidepool-api').spec.replicas = 'two'), /Deployment\/tidepool\/tidepool-api: \/spec\/replicas must be integer/],
    ['production', 'an apiVersion with no schema', (o) => (find(o, 'DaemonSet', 'tidepool-node-agent').apiVersion = 'extensions/v1beta1'), /DaemonSet\/tidepool-nodes\/tidepool-node-agent: \/apiVersion: no schema/],
    ['production', 'a selector that misses the template', (o) => (find(o, 'Deployment', 'tidepool-api').spec.selector.matchLabels['app.kubernetes.io/name'] = 'api'), /selector\.matchLabels does not match/],
    ['production', 'a secret as an environment value', (o) => container(o, 'Deployment', 'tidepool-api').env.push({ name: 'TIDEPOOL_ADMIN_KEY', value: 'x'.repeat(32) }), /TIDEPOOL_ADMIN_KEY is a secret given as a value/],
    ['production', 'a secret from a secretKeyRef', (o) => container(o, 'Deployment', 'tidepool-api').env.push({ name: 'TIDEPOOL_LOG_LEVEL', valueFrom: { secretKeyRef: { name: 'x', key: 'y' } } }), /TIDEPOOL_LOG_LEVEL comes from Secret x as an environment value/],
    ['production', 'a password in a ConfigMap URL', (o) => (find(o, 'ConfigMap', 'tidepool-api-settings').data.TIDEPOOL_DATABASE_URL = 'postgres://tidepool:hunter2@db.example.com/tidepool?sslmode=require'), /holds a URL with a password/],
    ['production', 'a setting config.ts does not know', (o) => (find(o, 'ConfigMap', 'tidepool-node-settings').data.TIDEPOOL_NODE_URLS = 'x'), /TIDEPOOL_NODE_URLS \(ConfigMap tidepool-node-settings\) is not a setting/],
    ['production', 'a *_FILE whose volume is not mounted', (o) => (container(o, 'Deployment', 'tidepool-api').volumeMounts = container(o, 'Deployment', 'tidepool-api').volumeMounts.filter((m: Any) => m.name !== 'secrets')), /TIDEPOOL_API_KEYS_FILE=\/etc\/tidepool\/secrets\/api-keys: no volume is mounted there/],
    ['production', 'a *_FILE the mounted Secret does not have', (o) => (container(o, 'Deployment', 'tidepool-api').env.find((e: Any) => e.name === 'TIDEPOOL_SECRETS_KEY_FILE').value = '/etc/tidepool/secrets/secret-key'), /has no file secret-key/],
    ['production', 'certificates mounted 0400 for a non-root user', (o) => (find(o, 'Deployment', 'tidepool-api').spec.template.spec.volumes.find((v: Any) => v.name === 'cluster-tls').secret.defaultMode = 0o400), /TIDEPOOL_CLUSTER_CLIENT_KEY=\/etc\/tidepool\/cluster-tls\/tls\.key: mode 400 .*user 1000 cannot read it/],
    ['production', 'no fsGroup for 0440 files', (o) => delete find(o, 'Deployment', 'tidepool-api').spec.template.spec.securityContext.fsGroup, /mode 440 without a pod fsGroup/],
    ['production', 'the host network in the restricted namespace', (o) => (find(o, 'Deployment', 'tidepool-api').spec.template.spec.hostNetwork = true), /hostNetwork is not allowed in tidepool \(restricted\)/],
    ['production', 'capabilities kept in the restricted namespace', (o) => (container(o, 'Deployment', 'tidepool-api').securityContext.capabilities = { add: ['NET_ADMIN'] }), /capabilities must drop ALL in tidepool \(restricted\)[^]*capability NET_ADMIN is not allowed/],
    ['production', 'a Service target port no container declares', (o) => (find(o, 'Service', 'tidepool-api').spec.ports[0].targetPort = 8080), /targetPort 8080 is not a port of Deployment\/tidepool\/tidepool-api/],
    ['production', 'an image from elsewhere', (o) => (container(o, 'DaemonSet', 'tidepool-node-agent').image = 'docker.io/someone/agent:latest'), /image docker\.io\/someone\/agent:latest is not from/],
    ['production', 'a missing pull Secret', (o) => (o.splice(o.findIndex((x: Any) => x.kind === 'Secret' && x.metadata.namespace === 'tidepool-nodes' && x.metadata.name.startsWith('tidepool-pull')), 1)), /imagePullSecret tidepool-pull-\S+ is not defined in tidepool-nodes/],
    ['production', 'the embedded node left on', (o) => (container(o, 'Deployment', 'tidepool-api').env.find((e: Any) => e.name === 'TIDEPOOL_EMBEDDED_NODE').value = 'on'), /TIDEPOOL_EMBEDDED_NODE is not off/],
    ['production', 'a database without TLS', (o) => (find(o, 'ConfigMap', 'tidepool-api-settings').data.TIDEPOOL_DATABASE_URL = 'postgres://tidepool@db.example.com:5432/tidepool?sslmode=disable'), /does not require TLS/],
    ['production', 'database credentials on a node', (o) => container(o, 'DaemonSet', 'tidepool-node-agent').env.push({ name: 'TIDEPOOL_DATABASE_URL', value: 'postgres://tidepool@db.example.com/tidepool?sslmode=require' }), /tidepool-node-agent: TIDEPOOL_DATABASE_URL is set: a node holds no cluster secrets/],
    ['production', 'isolation only warned about', (o) => (container(o, 'DaemonSet', 'tidepool-node-agent').env.find((e: Any) => e.name === 'TIDEPOOL_SANDBOX_ISOLATION').value = 'warn'), /TIDEPOOL_SANDBOX_ISOLATION is not require/],
    ['production', 'agents behind a Service with a virtual IP', (o) => delete find(o, 'Service', 'tidepool-node-agent').spec.clusterIP, /is not headless/],
    ['production', 'no toleration for the dedicated machines', (o) => (find(o, 'DaemonSet', 'tidepool-node-agent').spec.template.spec.tolerations = []), /does not tolerate the dedicated machines' taint/],
    ['production', 'no PodDisruptionBudget', (o) => o.splice(o.findIndex((x: Any) => x.kind === 'PodDisruptionBudget'), 1), /no PodDisruptionBudget/],
    ['production', 'no spread over machines', (o) => (find(o, 'Deployment', 'tidepool-api').spec.template.spec.topologySpreadConstraints = []), /no topology spread/],
    ['production', 'an ingress timeout below 620 s', (o) => (find(o, 'Ingress', 'tidepool').metadata.annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'] = '60'), /proxy-read-timeout is 60, below 620 s/],
    ['production', 'no wildcard sandbox host', (o) => find(o, 'Ingress', 'tidepool').spec.rules.pop(), /no rule for \*\.tidepool\.example\.com/],
    ['production', 'agents in the API namespace', (o) => (find(o, 'DaemonSet', 'tidepool-node-agent').metadata.namespace = 'tidepool'), /the node agents share the API namespace/],
    ['cert-manager', 'a CSI certificate for another group', (o) => (find(o, 'Deployment', 'tidepool-api').spec.template.spec.volumes.find((v: Any) => v.name === 'cluster-tls').csi.volumeAttributes['csi.cert-manager.io/fs-group'] = '2000'), /fs-group \(2000\) is not the pod's fsGroup \(1000\)/],
    ['in-cluster-registry', 'a registry CA the agents cannot find', (o) => (container(o, 'DaemonSet', 'tidepool-node-agent').env.find((e: Any) => e.name === 'NODE_EXTRA_CA_CERTS').value = '/etc/tidepool/registry-ca/bundle.crt'), /NODE_EXTRA_CA_CERTS=\/etc\/tidepool\/registry-ca\/bundle\.crt: the volume registry-ca has no file bundle\.crt/],
  ];

  it.each(mutations)('overlays/%s with %s is refused, naming it', async (overlay, _what, mutate, expected) => {
    const objects = structuredClone(rendered.get(overlay)!) as Any[];
    mutate(objects);
    const problems = await allProblems(objects);
    expect(problems.join('\n')).toMatch(expected);
  });
});

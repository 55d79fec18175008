/**
 * deploy/kubernetes, checked OFFLINE: no Kubernetes cluster runs where Tidepool is tested. The kustomization is
 * rendered (our own renderer, support/kustomize-render.ts, and `kubectl kustomize` as well where kubectl is
 * installed: both must give the same objects), every object is validated against the structural schema of its
 * kind and cross-checked (support/kube-manifest-check.ts: selectors, target ports, probes, settings known to
 * config.ts, referenced Secrets/keys/ConfigMaps/ServiceAccounts/Roles/volumes, images from the registry, RBAC
 * without wildcards). Then broken copies prove each check can fail. What this cannot prove: that a cluster
 * schedules the pods, that the node agent reaches its engine, or that the images start there.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot, run } from '@tidepool/testkit';
import { settingEnvNames } from '../src/config.ts';
import { checkManifests } from './support/kube-manifest-check.ts';
import { type KubeObject, KustomizeError, renderKustomization } from './support/kustomize-render.ts';

const dir = join(repoRoot(), 'deploy/kubernetes');
const work = mkdtempSync(join(tmpdir(), 'tp-kube-'));
const hasKubectl = (await run('kubectl', ['version', '--client'], { timeoutMs: 20_000 }).catch(() => ({ exitCode: 1 }))).exitCode === 0;

const REGISTRY = 'registry.example.com/tidepool/';
const options = { knownSettings: settingEnvNames(), imagePrefixes: [REGISTRY] };

function find(objects: KubeObject[], kind: string, name: string): any {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`${kind}/${name} not rendered`);
  return found;
}

function container(objects: KubeObject[], kind: string, name: string): any {
  return find(objects, kind, name).spec.template.spec.containers[0];
}

/** A copy of the directory with placeholder secret files, as an operator would have it. */
function withSecretFiles(): string {
  const copy = join(work, 'with-secrets');
  rmSync(copy, { recursive: true, force: true });
  cpSync(dir, copy, { recursive: true });
  for (const file of ['database-url', 'api-keys', 'secrets-key', 'ca.crt', 'api-client.crt', 'api-client.key', 'node.crt', 'node.key']) writeFileSync(join(copy, 'secrets', file), 'placeholder\n');
  writeFileSync(join(copy, 'secrets', 'registry-config.json'), '{"auths":{}}\n');
  return copy;
}

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('deploy/kubernetes (offline: rendered and schema-checked, never applied to a cluster)', () => {
  const objects = renderKustomization(dir);

  it('renders the namespace, RBAC, settings, PostgreSQL reference, API Deployment + Service and node-agent DaemonSet, and passes every check', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      [
        'ConfigMap/tidepool-settings',
        'DaemonSet/tidepool-node-agent',
        'Deployment/tidepool-api',
        'Namespace/tidepool',
        'Role/tidepool-api',
        'Role/tidepool-node-agent',
        'RoleBinding/tidepool-api',
        'RoleBinding/tidepool-node-agent',
        'Secret/tidepool-api-keys',
        'Secret/tidepool-cluster-tls',
        'Secret/tidepool-database',
        'Secret/tidepool-registry',
        'Service/tidepool-api',
        'Service/tidepool-postgres',
        'ServiceAccount/tidepool-api',
        'ServiceAccount/tidepool-node-agent',
      ].sort(),
    );
    expect(checkManifests(objects, options)).toEqual([]);
    expect(objects.filter((o) => o.kind !== 'Namespace').every((o) => o.metadata.namespace === 'tidepool')).toBe(true);
  });

  it('the API runs `tidepool api` unprivileged, without the engine or the host; the agent runs `tidepool node` with the engine socket on the host network', () => {
    const api = container(objects, 'Deployment', 'tidepool-api');
    const apiPod = find(objects, 'Deployment', 'tidepool-api').spec.template.spec;
    expect([...api.command, ...api.args]).toEqual(['tidepool', 'api']);
    expect(api.image).toBe(`${REGISTRY}api:latest`);
    expect(apiPod.securityContext.runAsNonRoot).toBe(true);
    expect(apiPod.hostNetwork).toBeUndefined();
    expect(apiPod.volumes.some((v: any) => v.hostPath)).toBe(false);
    expect(api.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(api.env.find((e: any) => e.name === 'TIDEPOOL_DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'tidepool-database', key: 'url' });

    const agent = container(objects, 'DaemonSet', 'tidepool-node-agent');
    const agentPod = find(objects, 'DaemonSet', 'tidepool-node-agent').spec.template.spec;
    expect([...agent.command, ...agent.args]).toEqual(['tidepool', 'node']);
    expect(agent.image).toBe(`${REGISTRY}node-agent:latest`);
    expect(agentPod.hostNetwork).toBe(true);
    expect(agentPod.dnsPolicy).toBe('ClusterFirstWithHostNet');
    expect(agentPod.volumes.find((v: any) => v.name === 'docker-socket').hostPath).toEqual({ path: '/var/run/docker.sock', type: 'Socket' });
    expect(agent.securityContext.privileged).toBeUndefined();
    expect(agent.securityContext.capabilities.drop).toEqual(['ALL']);
    expect(agent.env.find((e: any) => e.name === 'TIDEPOOL_NODE_URL').value).toBe('https://$(NODE_IP):7443');
    expect(agent.ports[0]).toMatchObject({ containerPort: 7443, hostPort: 7443 });
    for (const name of ['tidepool-api', 'tidepool-node-agent']) {
      expect(find(objects, 'ServiceAccount', name).automountServiceAccountToken).toBe(false);
      expect(find(objects, 'Role', name).rules).toEqual([]);
    }
  });

  it.skipIf(!hasKubectl)('kubectl kustomize renders the same objects (where kubectl is installed), and refuses while a secret file is missing', async () => {
    const copy = withSecretFiles();
    const res = await run('kubectl', ['kustomize', copy], { timeoutMs: 60_000 });
    expect(res.exitCode, res.stderr).toBe(0);
    const theirs = parseAllDocuments(res.stdout).map((d) => d.toJS() as KubeObject);
    const key = (o: KubeObject): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    expect(theirs.map(key).sort()).toEqual(objects.map(key).sort());
    for (const ours of objects) {
      const other = theirs.find((o) => key(o) === key(ours))!;
      if (ours.kind === 'Secret') {
        expect(Object.keys(other.data as object).sort(), key(ours)).toEqual(Object.keys(ours.data as object).sort());
        expect(other.type, key(ours)).toBe(ours.type);
      } else {
        expect(other, key(ours)).toEqual(ours);
      }
    }
    expect(checkManifests(theirs, options)).toEqual([]);

    rmSync(join(copy, 'secrets', 'node.key'));
    const missing = await run('kubectl', ['kustomize', copy], { timeoutMs: 60_000 });
    expect(missing.exitCode).not.toBe(0);
    expect(missing.stderr).toMatch(/node\.key/);
  });

  it('the renderer refuses what it does not understand instead of dropping it', () => {
    const copy = withSecretFiles();
    writeFileSync(join(copy, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [api.yaml]\ncommonLabels: {a: b}\n');
    expect(() => renderKustomization(copy)).toThrow(KustomizeError);
    expect(() => renderKustomization(copy)).toThrow(/commonLabels/);
    writeFileSync(join(copy, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [https://example.com/x.yaml]\n');
    expect(() => renderKustomization(copy)).toThrow(/not a local YAML file/);
    writeFileSync(join(copy, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../kubernetes/api.yaml]\n');
    expect(() => renderKustomization(copy)).toThrow(/outside the kustomization's directory/);
    writeFileSync(join(copy, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [api.yaml]\ngeneratorOptions: {disableNameSuffixHash: true}\nsecretGenerator: [{name: s, files: [/etc/passwd]}]\n');
    expect(() => renderKustomization(copy)).toThrow(/file '\/etc\/passwd' is outside/);
    writeFileSync(join(copy, 'api.yaml'), 'kind: [unclosed\n');
    writeFileSync(join(copy, 'kustomization.yaml'), 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [api.yaml]\n');
    expect(() => renderKustomization(copy)).toThrow(/api\.yaml/);
  });

  /** Each mutation breaks one thing a check is for; the check must name it. */
  const mutations: [string, (objects: any[]) => void, RegExp][] = [
    ['a misspelt container field', (o) => (container(o, 'Deployment', 'tidepool-api').imagePullPolicyy = 'Always'), /Deployment\/tidepool-api: \/spec\/template\/spec\/containers\/0.*(additional|Unexpected)/i],
    ['a wrong apiVersion', (o) => (find(o, 'DaemonSet', 'tidepool-node-agent').apiVersion = 'extensions/v1beta1'), /DaemonSet\/tidepool-node-agent: \/apiVersion/],
    ['a selector that misses the template', (o) => (find(o, 'Deployment', 'tidepool-api').spec.selector.matchLabels['app.kubernetes.io/name'] = 'api'), /selector\.matchLabels does not match/],
    ['a Service target port no container declares', (o) => (find(o, 'Service', 'tidepool-api').spec.ports[0].targetPort = 8080), /targetPort 8080 is not a port of Deployment\/tidepool-api/],
    ['a Service selecting nothing', (o) => (find(o, 'Service', 'tidepool-api').spec.selector = { app: 'nothing' }), /selector matches no Deployment or DaemonSet/],
    ['a probe on an undeclared port', (o) => (container(o, 'DaemonSet', 'tidepool-node-agent').readinessProbe.tcpSocket.port = 'grpc'), /readinessProbe names port 'grpc'/],
    ['an env var that is no setting', (o) => container(o, 'Deployment', 'tidepool-api').env.push({ name: 'TIDEPOOL_DATABSE_URL', value: 'x' }), /'TIDEPOOL_DATABSE_URL' is not a Tidepool setting/],
    ['a ConfigMap key that is no setting', (o) => (find(o, 'ConfigMap', 'tidepool-settings').data.TIDEPOOL_MAX_SANDBOXEZ = '3'), /sets 'TIDEPOOL_MAX_SANDBOXEZ', which is not a Tidepool setting/],
    ['a helper variable nobody uses', (o) => container(o, 'DaemonSet', 'tidepool-node-agent').env.push({ name: 'UNUSED', value: 'x' }), /'UNUSED' is neither a Tidepool setting nor used/],
    ['a $(VAR) used before it is defined', (o) => container(o, 'DaemonSet', 'tidepool-node-agent').env.unshift({ name: 'TIDEPOOL_NODE_URL_EARLY', value: 'https://$(NODE_IP)' }), /uses \$\(NODE_IP\), which is not defined before it/],
    ['a Secret key that does not exist', (o) => (container(o, 'Deployment', 'tidepool-api').env.find((e: any) => e.name === 'TIDEPOOL_DATABASE_URL').valueFrom.secretKeyRef.key = 'uri'), /Secret 'tidepool-database' has no key 'uri'/],
    ['a Secret that is not defined', (o) => o.splice(o.findIndex((x) => x.kind === 'Secret' && x.metadata.name === 'tidepool-cluster-tls'), 1), /Secret 'tidepool-cluster-tls' is not defined/],
    ['a ServiceAccount that is not defined', (o) => (find(o, 'DaemonSet', 'tidepool-node-agent').spec.template.spec.serviceAccountName = 'default-sa'), /ServiceAccount 'default-sa' is not defined/],
    ['a volume mount without a volume', (o) => container(o, 'Deployment', 'tidepool-api').volumeMounts.push({ name: 'cache', mountPath: '/cache' }), /mounts volume 'cache', which the pod does not define/],
    ['an image not renamed to the registry', (o) => (container(o, 'Deployment', 'tidepool-api').image = 'tidepool/api:latest'), /is not from the registry/],
    ['a Role with a wildcard', (o) => find(o, 'Role', 'tidepool-api').rules.push({ apiGroups: [''], resources: ['*'], verbs: ['get'] }), /Role\/tidepool-api: a rule uses '\*'/],
    ['a Role reading secrets', (o) => find(o, 'Role', 'tidepool-node-agent').rules.push({ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }), /grants access to secrets/],
    ['a binding to an undefined Role', (o) => (find(o, 'RoleBinding', 'tidepool-api').roleRef.name = 'admin'), /Role 'admin' is not defined/],
    ['an object outside the namespace', (o) => (find(o, 'ConfigMap', 'tidepool-settings').metadata.namespace = 'default'), /namespace 'default' is not defined/],
    ['an unknown kind', (o) => o.push({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x', namespace: 'tidepool' } }), /kind 'Pod' has no schema/],
    ['a pull secret of the wrong type', (o) => (find(o, 'Secret', 'tidepool-registry').type = 'Opaque'), /is of type Opaque, not kubernetes\.io\/dockerconfigjson/],
  ];

  it.each(mutations)('the check catches %s', (_what, mutate, expected) => {
    const copy = structuredClone(objects);
    mutate(copy);
    const problems = checkManifests(copy, options);
    expect(problems.join('\n')).toMatch(expected);
  });
});

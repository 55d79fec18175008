/**
 * The offline checks of rendered Kubernetes manifests (what `kubectl kustomize` printed), in three layers:
 *  1. schemaProblems: every object against the official OpenAPI schema of its apiVersion and kind, through the
 *     `kubernetes-models` family (its validators are generated from those schemas; cert-manager's from its CRDs).
 *  2. unknownFieldProblems: the schemas allow fields they do not name, which an API server with strict field
 *     validation (kubectl's default) refuses; the TypeScript types generated from the same schemas do not, so each
 *     object is type-checked as an object literal of its kind's type (excess properties are errors).
 *  3. checkManifests: what no schema can see. References (Secrets, ConfigMaps, keys, ServiceAccounts, volumes,
 *     Service ports) resolve; selectors match; no secret in an environment value; every `*_FILE` (and certificate)
 *     path is a file of a mounted volume that the container's user can read; pods of a namespace that enforces the
 *     `restricted` Pod Security level meet it; every TIDEPOOL_* name is a setting; images come from the registry.
 * Each returns the problems found, one line each (`Kind/namespace/name: what`); none = the check passed.
 */
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are plain JSON, validated by layer 1 */
type Any = any;

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export function objectId(object: KubeObject): string {
  return `${object.kind}/${object.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata?.name ?? '?'}`;
}

/** The npm package holding the models of an API group: Kubernetes' own groups, or a CRD family's. */
function modelModule(apiVersion: string): string | undefined {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  if (group === 'cert-manager.io') return `@kubernetes-models/cert-manager/${apiVersion}`;
  if (group === '' || group.endsWith('.k8s.io') || ['apps', 'batch', 'policy', 'autoscaling'].includes(group)) return `kubernetes-models/${apiVersion}`;
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// 1. The official schemas.

export async function schemaProblems(objects: KubeObject[]): Promise<string[]> {
  const problems: string[] = [];
  for (const object of objects) {
    const module = typeof object.apiVersion === 'string' ? modelModule(object.apiVersion) : undefined;
    const Model = module ? ((await import(module).catch(() => ({}))) as Record<string, Any>)[object.kind] : undefined;
    if (typeof Model !== 'function' || typeof Model.prototype?.validate !== 'function') {
      problems.push(`${objectId(object)}: /apiVersion: no schema for ${String(object.apiVersion)} ${String(object.kind)}`);
      continue;
    }
    try {
      new Model(object).validate();
    } catch (error) {
      const errors = ((error as { errors?: { instancePath?: string; message?: string }[] }).errors ?? []).slice(0, 5);
      if (errors.length === 0) problems.push(`${objectId(object)}: ${(error as Error).message}`);
      for (const e of errors) problems.push(`${objectId(object)}: ${e.instancePath || '/'} ${e.message ?? 'invalid'}`);
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Unknown fields, through the generated TypeScript types.

const here = dirname(fileURLToPath(import.meta.url));

/** Type-checks every object as a literal of `I<Kind>`; one TypeScript program for all of them (a few seconds). */
export function unknownFieldProblems(objects: KubeObject[]): string[] {
  const problems: string[] = [];
  // A file that is never written: the compiler host below serves it, beside this one so that imports resolve.
  const file = join(here, '__rendered_manifests__.ts');
  const chunks: string[] = [];
  const owners: { from: number; to: number; id: string }[] = [];
  let line = 0;
  objects.forEach((object, index) => {
    const module = modelModule(object.apiVersion);
    if (!module) return; // layer 1 names it
    const chunk = `import type { I${object.kind} as T${index} } from '${module}';\nexport const o${index}: T${index} = ${JSON.stringify(object, null, 1)};`;
    chunks.push(chunk);
    const from = line;
    line += chunk.split('\n').length;
    owners.push({ from, to: line, id: objectId(object) });
  });
  const text = chunks.join('\n') + '\n';
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (name) => name === file || fileExists.call(host, name);
  host.readFile = (name) => (name === file ? text : readFile.call(host, name));
  host.getSourceFile = (name, language, ...rest) => (name === file ? ts.createSourceFile(name, text, language) : getSourceFile.call(host, name, language, ...rest));
  const program = ts.createProgram([file], options, host);
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    if (diagnostic.file?.fileName !== file || diagnostic.start === undefined) {
      problems.push(`(type check) ${message}`);
      continue;
    }
    const at = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line;
    const owner = owners.find((o) => at >= o.from && at < o.to);
    const field = /'"?([^"']+)"?' does not exist in type/.exec(message)?.[1];
    problems.push(`${owner?.id ?? '?'}: ${field ? `unknown field '${field}': ` : ''}${message}`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// 3. What no schema sees.

export interface CheckOptions {
  /** Environment variables that feed a setting (config.ts settingEnvNames()). */
  knownSettings: Iterable<string>;
  /** Every container image must start with one of these (the overlay's `images` renamed them). */
  imagePrefixes: string[];
  /** Secrets made outside the manifests, on purpose (e.g. an ingress certificate from cert-manager), by `namespace/name`. */
  externalSecrets?: string[];
}

interface Workload {
  object: KubeObject;
  namespace: string;
  pod: Any;
  labels: Record<string, string>;
}

export function workloadsOf(objects: KubeObject[]): Workload[] {
  return objects
    .filter((o) => ['Deployment', 'DaemonSet', 'StatefulSet', 'Job'].includes(o.kind))
    .map((object) => {
      const template = (object as Any).spec?.template ?? {};
      return { object, namespace: object.metadata.namespace ?? 'default', pod: template.spec ?? {}, labels: template.metadata?.labels ?? {} };
    });
}

function matches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  return selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** A setting whose value is a secret: it may only come as `<name>_FILE` (or a path setting), never as a value. */
const SECRET_NAME = /(^|_)(KEY|KEYS|PASSWORD|PASSWD|SECRET|TOKEN|SEED|CREDENTIALS?)$/;
/** Settings whose value is the path of a file the process reads (besides every `*_FILE`). */
const PATH_SETTINGS = new Set([
  'TIDEPOOL_CLUSTER_CLIENT_CERT',
  'TIDEPOOL_CLUSTER_CLIENT_KEY',
  'TIDEPOOL_CLUSTER_CA',
  'TIDEPOOL_NODE_TLS_CERT',
  'TIDEPOOL_NODE_TLS_KEY',
  'TIDEPOOL_NODE_TLS_CA',
  'TIDEPOOL_TLS_CERT',
  'TIDEPOOL_TLS_KEY',
  'NODE_EXTRA_CA_CERTS',
  // The distribution registry's own (the in-cluster registry).
  'REGISTRY_HTTP_TLS_CERTIFICATE',
  'REGISTRY_HTTP_TLS_KEY',
  'REGISTRY_AUTH_HTPASSWD_PATH',
]);
/** Volume types the `restricted` Pod Security level allows. */
const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];

/** A container's environment as the process sees it: env values plus the keys of envFrom ConfigMaps. */
export function environmentOf(objects: KubeObject[], namespace: string, container: Any): Map<string, { value?: string; from: string; valueFrom?: Any }> {
  const env = new Map<string, { value?: string; from: string; valueFrom?: Any }>();
  for (const source of container.envFrom ?? []) {
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.namespace === namespace && o.metadata.name === source.configMapRef?.name) as Any;
    for (const [name, value] of Object.entries((configMap?.data ?? {}) as Record<string, string>)) env.set((source.prefix ?? '') + name, { value, from: `ConfigMap ${source.configMapRef.name}` });
  }
  for (const entry of container.env ?? []) env.set(entry.name, { value: entry.value, valueFrom: entry.valueFrom, from: 'env' });
  return env;
}

function modeOf(mode: unknown, fallback: number): number {
  return typeof mode === 'number' ? mode : fallback;
}

export function checkManifests(objects: KubeObject[], options: CheckOptions): string[] {
  const problems: string[] = [];
  const known = new Set(options.knownSettings);
  const external = new Set(options.externalSecrets ?? []);
  const find = (kind: string, namespace: string | undefined, name: string): Any =>
    objects.find((o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace));

  // Names are unique per kind and namespace.
  const seen = new Set<string>();
  for (const object of objects) {
    if (seen.has(objectId(object))) problems.push(`${objectId(object)}: defined twice`);
    seen.add(objectId(object));
  }

  // Namespaced objects name a namespace the manifests make.
  for (const object of objects) {
    if (['Namespace', 'ClusterIssuer', 'ClusterRole', 'ClusterRoleBinding'].includes(object.kind)) continue;
    const ns = object.metadata.namespace;
    if (!ns) problems.push(`${objectId(object)}: no namespace`);
    else if (!find('Namespace', undefined, ns)) problems.push(`${objectId(object)}: namespace ${ns} is not defined`);
  }

  // ConfigMaps hold no secrets (they are readable by whoever may read the namespace's configuration).
  for (const configMap of objects.filter((o) => o.kind === 'ConfigMap')) {
    for (const [name, value] of Object.entries(((configMap as Any).data ?? {}) as Record<string, string>)) {
      if (SECRET_NAME.test(name) && !PATH_SETTINGS.has(name)) problems.push(`${objectId(configMap)}: ${name} is a secret: give it as ${name}_FILE from a Secret`);
      if (/^[a-z][a-z0-9+.-]*:\/\/[^/@\s]*:[^/@\s]*@/i.test(value)) problems.push(`${objectId(configMap)}: ${name} holds a URL with a password: give the password as a file (e.g. TIDEPOOL_DATABASE_PASSWORD_FILE)`);
    }
  }

  for (const workload of workloadsOf(objects)) {
    const id = objectId(workload.object);
    const { pod, namespace } = workload;
    const selector = (workload.object as Any).spec?.selector?.matchLabels;
    if (!matches(selector, workload.labels)) problems.push(`${id}: spec.selector.matchLabels does not match the pod template's labels`);

    // References.
    const sa = pod.serviceAccountName;
    if (sa && !find('ServiceAccount', namespace, sa)) problems.push(`${id}: ServiceAccount ${sa} is not defined in ${namespace}`);
    for (const pull of pod.imagePullSecrets ?? []) {
      const secret = find('Secret', namespace, pull.name);
      if (!secret) problems.push(`${id}: imagePullSecret ${pull.name} is not defined in ${namespace}`);
      else if (secret.type !== 'kubernetes.io/dockerconfigjson') problems.push(`${id}: imagePullSecret ${pull.name} is not of type kubernetes.io/dockerconfigjson`);
    }
    const volumes = new Map<string, Any>((pod.volumes ?? []).map((v: Any) => [v.name, v]));
    for (const volume of volumes.values()) {
      if (volume.secret) {
        const secret = find('Secret', namespace, volume.secret.secretName);
        if (!secret) {
          if (!external.has(`${namespace}/${volume.secret.secretName}`)) problems.push(`${id}: volume ${volume.name}: Secret ${volume.secret.secretName} is not defined in ${namespace}`);
        } else {
          for (const item of volume.secret.items ?? []) if (!(item.key in (secret.data ?? {}))) problems.push(`${id}: volume ${volume.name}: Secret ${volume.secret.secretName} has no key ${item.key}`);
        }
      }
      if (volume.configMap) {
        const configMap = find('ConfigMap', namespace, volume.configMap.name);
        if (!configMap) problems.push(`${id}: volume ${volume.name}: ConfigMap ${volume.configMap.name} is not defined in ${namespace}`);
        else for (const item of volume.configMap.items ?? []) if (!(item.key in (configMap.data ?? {}))) problems.push(`${id}: volume ${volume.name}: ConfigMap ${volume.configMap.name} has no key ${item.key}`);
      }
      if (volume.persistentVolumeClaim && !find('PersistentVolumeClaim', namespace, volume.persistentVolumeClaim.claimName)) problems.push(`${id}: volume ${volume.name}: PersistentVolumeClaim ${volume.persistentVolumeClaim.claimName} is not defined in ${namespace}`);
    }

    // Pod Security `restricted`, where the namespace enforces it.
    const nsObject = find('Namespace', undefined, namespace);
    const restricted = nsObject?.metadata?.labels?.['pod-security.kubernetes.io/enforce'] === 'restricted';
    if (restricted) {
      for (const flag of ['hostNetwork', 'hostPID', 'hostIPC']) if (pod[flag]) problems.push(`${id}: ${flag} is not allowed in ${namespace} (restricted)`);
      for (const volume of volumes.values()) {
        const type = Object.keys(volume).find((k) => k !== 'name');
        if (!type || !RESTRICTED_VOLUMES.includes(type)) problems.push(`${id}: volume ${volume.name} of type ${type} is not allowed in ${namespace} (restricted)`);
      }
      const seccomp = pod.securityContext?.seccompProfile?.type;
      for (const container of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
        const sc = container.securityContext ?? {};
        const where = `${id}: container ${container.name}`;
        if (sc.privileged) problems.push(`${where}: privileged is not allowed in ${namespace} (restricted)`);
        if (sc.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation must be false in ${namespace} (restricted)`);
        if (!(sc.capabilities?.drop ?? []).includes('ALL')) problems.push(`${where}: capabilities must drop ALL in ${namespace} (restricted)`);
        for (const cap of sc.capabilities?.add ?? []) if (cap !== 'NET_BIND_SERVICE') problems.push(`${where}: capability ${cap} is not allowed in ${namespace} (restricted)`);
        if ((sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot) !== true) problems.push(`${where}: runAsNonRoot must be true in ${namespace} (restricted)`);
        if ((sc.runAsUser ?? pod.securityContext?.runAsUser) === 0) problems.push(`${where}: runAsUser 0 is not allowed in ${namespace} (restricted)`);
        const profile = sc.seccompProfile?.type ?? seccomp;
        if (profile !== 'RuntimeDefault' && profile !== 'Localhost') problems.push(`${where}: seccompProfile must be RuntimeDefault or Localhost in ${namespace} (restricted)`);
        for (const port of container.ports ?? []) if (port.hostPort) problems.push(`${where}: hostPort ${port.hostPort} is not allowed in ${namespace} (restricted)`);
      }
    }

    const user = pod.securityContext?.runAsUser;
    const fsGroup = pod.securityContext?.fsGroup;
    for (const container of pod.containers ?? []) {
      const where = `${id}: container ${container.name}`;
      const uid = container.securityContext?.runAsUser ?? user;
      if (!options.imagePrefixes.some((prefix) => String(container.image).startsWith(prefix))) problems.push(`${where}: image ${container.image} is not from ${options.imagePrefixes.join(' or ')}`);
      for (const source of container.envFrom ?? []) {
        if (source.secretRef) problems.push(`${where}: envFrom Secret ${source.secretRef.name}: secrets reach the process as files, never as environment values`);
        if (source.configMapRef && !find('ConfigMap', namespace, source.configMapRef.name)) problems.push(`${where}: envFrom ConfigMap ${source.configMapRef.name} is not defined in ${namespace}`);
      }
      const env = environmentOf(objects, namespace, container);
      const mounts: Any[] = container.volumeMounts ?? [];
      for (const mount of mounts) if (!volumes.has(mount.name)) problems.push(`${where}: volumeMount ${mount.name} has no volume`);

      for (const [name, entry] of env) {
        if (name.startsWith('TIDEPOOL_') && !known.has(name)) problems.push(`${where}: ${name} (${entry.from}) is not a setting of apps/api/src/config.ts`);
        if (entry.valueFrom?.secretKeyRef) problems.push(`${where}: ${name} comes from Secret ${entry.valueFrom.secretKeyRef.name} as an environment value: give it as ${name}_FILE`);
        if (entry.value !== undefined && SECRET_NAME.test(name) && !PATH_SETTINGS.has(name)) problems.push(`${where}: ${name} is a secret given as a value (${entry.from}): give it as ${name}_FILE from a Secret`);
        const paths: string[] = [];
        if (entry.value && (name.endsWith('_FILE') || PATH_SETTINGS.has(name))) paths.push(entry.value);
        const rootCert = entry.value && name === 'TIDEPOOL_DATABASE_URL' ? /[?&]sslrootcert=([^&]+)/.exec(entry.value)?.[1] : undefined;
        if (rootCert) paths.push(decodeURIComponent(rootCert));
        for (const path of paths) problems.push(...fileProblems(`${where}: ${name}=${path}`, path, mounts, volumes, find, namespace, uid, fsGroup));
      }
    }
  }

  // Services select pods, and their target ports are ports those pods declare.
  for (const service of objects.filter((o) => o.kind === 'Service')) {
    const spec = (service as Any).spec ?? {};
    if (spec.type === 'ExternalName') continue;
    const selected = workloadsOf(objects).filter((w) => w.namespace === service.metadata.namespace && matches(spec.selector, w.labels));
    if (selected.length === 0) {
      problems.push(`${objectId(service)}: selects no pods of the manifests`);
      continue;
    }
    for (const port of spec.ports ?? []) {
      const target = port.targetPort ?? port.port;
      const declared = selected.some((w) => (w.pod.containers ?? []).some((c: Any) => (c.ports ?? []).some((p: Any) => p.name === target || p.containerPort === target)));
      if (!declared) problems.push(`${objectId(service)}: targetPort ${target} is not a port of ${selected.map((w) => objectId(w.object)).join(', ')}`);
    }
  }

  // PodDisruptionBudgets select pods.
  for (const pdb of objects.filter((o) => o.kind === 'PodDisruptionBudget')) {
    const selector = (pdb as Any).spec?.selector?.matchLabels;
    if (!workloadsOf(objects).some((w) => w.namespace === pdb.metadata.namespace && matches(selector, w.labels))) problems.push(`${objectId(pdb)}: selects no pods of the manifests`);
  }

  // Ingresses reach defined Services on their ports; their TLS secrets are defined or declared external.
  for (const ingress of objects.filter((o) => o.kind === 'Ingress')) {
    const ns = ingress.metadata.namespace!;
    for (const rule of (ingress as Any).spec?.rules ?? []) {
      for (const path of rule.http?.paths ?? []) {
        const backend = path.backend?.service;
        const service = backend && find('Service', ns, backend.name);
        if (!service) problems.push(`${objectId(ingress)}: host ${rule.host}: Service ${backend?.name} is not defined in ${ns}`);
        else if (!(service.spec.ports ?? []).some((p: Any) => p.name === backend.port?.name || p.port === backend.port?.number)) problems.push(`${objectId(ingress)}: host ${rule.host}: Service ${backend.name} has no port ${backend.port?.name ?? backend.port?.number}`);
      }
    }
    for (const tls of (ingress as Any).spec?.tls ?? []) {
      if (!find('Secret', ns, tls.secretName) && !external.has(`${ns}/${tls.secretName}`)) problems.push(`${objectId(ingress)}: TLS Secret ${tls.secretName} is not defined in ${ns}`);
    }
  }
  return problems;
}

/**
 * Problems with one file a container reads: it must be under a mount of a volume that has it (a Secret's or
 * ConfigMap's key, a CSI certificate file, a host directory), and the container's user must be able to read it.
 */
function fileProblems(where: string, path: string, mounts: Any[], volumes: Map<string, Any>, find: (kind: string, ns: string, name: string) => Any, namespace: string, uid: number | undefined, fsGroup: number | undefined): string[] {
  if (!path.startsWith('/')) return [`${where}: not an absolute path`];
  const mount = mounts
    .filter((m) => path === m.mountPath || path.startsWith(m.mountPath.replace(/\/$/, '') + '/'))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return [`${where}: no volume is mounted there`];
  const volume = volumes.get(mount.name);
  if (!volume) return [];
  const relative = posix.relative(mount.mountPath, path);
  const root = uid === 0;
  const readable = (mode: number): boolean => root || (mode & 0o004) !== 0 || (fsGroup !== undefined && (mode & 0o040) !== 0);
  if (volume.secret || volume.configMap) {
    const source = volume.secret ?? volume.configMap;
    const object = volume.secret ? find('Secret', namespace, source.secretName) : find('ConfigMap', namespace, source.name);
    const items: Any[] | undefined = source.items;
    const item = items ? items.find((i) => i.path === relative) : undefined;
    if (items && !item) return [`${where}: the volume ${volume.name} has no file ${relative} (items: ${items.map((i) => i.path).join(', ')})`];
    if (!items && object && !(relative in (object.data ?? {}))) return [`${where}: ${volume.secret ? 'Secret' : 'ConfigMap'} ${object.metadata.name} has no key ${relative}`];
    const mode = modeOf(item?.mode, modeOf(source.defaultMode, 0o644));
    if (!readable(mode)) return [`${where}: mode ${mode.toString(8)} without a pod fsGroup: user ${uid ?? '(image default)'} cannot read it`];
    return [];
  }
  if (volume.csi) {
    const attributes = (volume.csi.volumeAttributes ?? {}) as Record<string, string>;
    if (volume.csi.driver === 'csi.cert-manager.io') {
      const files = [attributes['csi.cert-manager.io/certificate-file'] ?? 'tls.crt', attributes['csi.cert-manager.io/privatekey-file'] ?? 'tls.key', attributes['csi.cert-manager.io/ca-file'] ?? 'ca.crt'];
      if (!files.includes(relative)) return [`${where}: cert-manager's CSI volume ${volume.name} writes ${files.join(', ')}, not ${relative}`];
      const group = attributes['csi.cert-manager.io/fs-group'];
      if (!root && (fsGroup === undefined || group !== String(fsGroup))) return [`${where}: the CSI volume's fs-group (${group ?? 'unset'}) is not the pod's fsGroup (${fsGroup ?? 'unset'}): user ${uid} cannot read its key`];
    }
    return [];
  }
  if (volume.hostPath) return root ? [] : [`${where}: a host file, readable only by root, for user ${uid ?? '(image default)'}`];
  return [`${where}: volume ${volume.name} is not one that holds a provided file`];
}

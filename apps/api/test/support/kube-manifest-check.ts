/**
 * The offline check of rendered Kubernetes manifests: each object against its kind's structural schema
 * (kube-schema.ts), then what a schema cannot see: names unique, selectors matching their pod templates,
 * Services' target ports being container ports of the pods they select, probes naming real ports, every
 * TIDEPOOL_* variable a setting the platform knows, every referenced Secret (and key), ConfigMap,
 * ServiceAccount, Role and volume defined, every image renamed to the registry, and RBAC granting no wildcard
 * or secret access. Returns the problems found, one line each (`Kind/name: what`); none = the check passed.
 */
import { Value } from '@sinclair/typebox/value';
import { KIND_SCHEMAS } from './kube-schema.ts';
import type { KubeObject } from './kustomize-render.ts';

export interface CheckOptions {
  /** Environment variables that feed a setting (config.ts settingEnvNames()). */
  knownSettings: Iterable<string>;
  /** Every container image must start with one of these (the kustomization's `images` renamed them). */
  imagePrefixes?: string[];
}

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are plain JSON, checked structurally first */
type Any = any;

function id(object: KubeObject): string {
  return `${object.kind}/${object.metadata?.name ?? '?'}`;
}

function workloads(objects: KubeObject[]): KubeObject[] {
  return objects.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet');
}

function containersOf(object: KubeObject): Any[] {
  return ((object as Any).spec?.template?.spec?.containers ?? []) as Any[];
}

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** `$(NAME)` references in an env value (Kubernetes expands only variables defined earlier in the list). */
function references(value: string): string[] {
  return [...value.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)].map((m) => m[1]);
}

export function checkManifests(objects: KubeObject[], options: CheckOptions): string[] {
  const problems: string[] = [];
  const known = new Set(options.knownSettings);

  // 1. Structure, per kind.
  const valid: KubeObject[] = [];
  for (const object of objects) {
    const schema = KIND_SCHEMAS[object.kind];
    if (!schema) {
      problems.push(`${id(object)}: kind '${object.kind}' has no schema in the offline check (kube-schema.ts)`);
      continue;
    }
    const errors = [...Value.Errors(schema, object)];
    for (const error of errors.slice(0, 5)) problems.push(`${id(object)}: ${error.path || '/'}: ${error.message}`);
    if (errors.length === 0) valid.push(object);
  }

  // 2. Names unique per kind and namespace; namespaced objects in a namespace that is defined.
  const seen = new Set<string>();
  const namespaces = new Set(valid.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name));
  for (const object of valid) {
    const key = `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
    if (seen.has(key)) problems.push(`${id(object)}: defined twice`);
    seen.add(key);
    if (object.kind !== 'Namespace' && !namespaces.has(object.metadata.namespace ?? '')) {
      problems.push(`${id(object)}: namespace '${object.metadata.namespace ?? '(none)'}' is not defined by the manifests`);
    }
  }
  const byKind = (kind: string): Map<string, Any> => new Map(valid.filter((o) => o.kind === kind).map((o) => [o.metadata.name, o]));
  const secrets = byKind('Secret');
  const configMaps = byKind('ConfigMap');
  const serviceAccounts = byKind('ServiceAccount');
  const roles = byKind('Role');
  const secretKeys = (secret: Any): string[] => [...Object.keys(secret.data ?? {}), ...Object.keys(secret.stringData ?? {})];

  // 3. Workloads: selector vs template labels, references, volumes, env, probes, images.
  for (const workload of workloads(valid) as Any[]) {
    const name = id(workload);
    const template = workload.spec.template;
    if (!matches(workload.spec.selector.matchLabels, template.metadata.labels)) problems.push(`${name}: selector.matchLabels does not match the pod template's labels`);
    if (Object.keys(workload.spec.selector.matchLabels).length === 0) problems.push(`${name}: selector.matchLabels is empty`);
    const pod = template.spec;
    if (pod.serviceAccountName && !serviceAccounts.has(pod.serviceAccountName)) problems.push(`${name}: ServiceAccount '${pod.serviceAccountName}' is not defined`);
    if (!pod.serviceAccountName) problems.push(`${name}: runs as the namespace's default ServiceAccount (name its own)`);
    for (const pull of pod.imagePullSecrets ?? []) {
      const secret = secrets.get(pull.name);
      if (!secret) problems.push(`${name}: image pull Secret '${pull.name}' is not defined`);
      else if (secret.type !== 'kubernetes.io/dockerconfigjson') problems.push(`${name}: image pull Secret '${pull.name}' is of type ${secret.type ?? 'Opaque'}, not kubernetes.io/dockerconfigjson`);
    }
    const volumes = new Map<string, Any>(((pod.volumes ?? []) as Any[]).map((v) => [v.name, v]));
    const mounted = new Set<string>();
    for (const volume of volumes.values()) {
      const sources = ['secret', 'configMap', 'emptyDir', 'hostPath', 'persistentVolumeClaim'].filter((s) => volume[s] !== undefined);
      if (sources.length !== 1) problems.push(`${name}: volume '${volume.name}' must have exactly one source, has ${sources.length}`);
      if (volume.secret) {
        const secret = secrets.get(volume.secret.secretName);
        if (!secret) problems.push(`${name}: volume '${volume.name}': Secret '${volume.secret.secretName}' is not defined`);
        for (const item of volume.secret.items ?? []) {
          if (secret && !secretKeys(secret).includes(item.key)) problems.push(`${name}: volume '${volume.name}': Secret '${secret.metadata.name}' has no key '${item.key}'`);
        }
      }
      if (volume.configMap) {
        const map = configMaps.get(volume.configMap.name);
        if (!map) problems.push(`${name}: volume '${volume.name}': ConfigMap '${volume.configMap.name}' is not defined`);
        for (const item of volume.configMap.items ?? []) {
          if (map && !(item.key in (map.data ?? {}))) problems.push(`${name}: volume '${volume.name}': ConfigMap '${map.metadata.name}' has no key '${item.key}'`);
        }
      }
    }
    for (const container of containersOf(workload)) {
      const where = `${name} container ${container.name}`;
      if (options.imagePrefixes && !options.imagePrefixes.some((p) => container.image.startsWith(p))) {
        problems.push(`${where}: image '${container.image}' is not from the registry (${options.imagePrefixes.join(', ')}): add it to the kustomization's images`);
      }
      if (!/:[^/:@]+$|@sha256:[0-9a-f]{64}$/.test(container.image)) problems.push(`${where}: image '${container.image}' names no tag or digest`);
      for (const mount of container.volumeMounts ?? []) {
        if (!volumes.has(mount.name)) problems.push(`${where}: mounts volume '${mount.name}', which the pod does not define`);
        mounted.add(mount.name);
      }
      const portNames = new Set(((container.ports ?? []) as Any[]).map((p) => p.name).filter(Boolean));
      const portNumbers = new Set(((container.ports ?? []) as Any[]).map((p) => p.containerPort));
      for (const probeName of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
        const probe = container[probeName];
        if (!probe) continue;
        const handlers = ['httpGet', 'tcpSocket', 'exec'].filter((h) => probe[h] !== undefined);
        if (handlers.length !== 1) problems.push(`${where}: ${probeName} must have exactly one handler, has ${handlers.length}`);
        const port = probe.httpGet?.port ?? probe.tcpSocket?.port;
        if (typeof port === 'string' && !portNames.has(port)) problems.push(`${where}: ${probeName} names port '${port}', which the container does not declare`);
        if (typeof port === 'number' && !portNumbers.has(port)) problems.push(`${where}: ${probeName} uses port ${port}, which the container does not declare`);
      }
      for (const from of container.envFrom ?? []) {
        if (from.configMapRef) {
          const map = configMaps.get(from.configMapRef.name);
          if (!map) problems.push(`${where}: envFrom ConfigMap '${from.configMapRef.name}' is not defined`);
          for (const key of Object.keys(map?.data ?? {})) {
            if (!known.has(key)) problems.push(`${where}: ConfigMap '${from.configMapRef.name}' sets '${key}', which is not a Tidepool setting`);
          }
        }
        if (from.secretRef) {
          const secret = secrets.get(from.secretRef.name);
          if (!secret) problems.push(`${where}: envFrom Secret '${from.secretRef.name}' is not defined`);
          for (const key of secret ? secretKeys(secret) : []) {
            if (!known.has(key)) problems.push(`${where}: Secret '${from.secretRef.name}' sets '${key}', which is not a Tidepool setting`);
          }
        }
      }
      const env = (container.env ?? []) as Any[];
      const defined: string[] = [];
      const referenced = new Set<string>();
      for (const variable of env) {
        if (defined.includes(variable.name)) problems.push(`${where}: env '${variable.name}' is set twice`);
        const sources = (variable.value !== undefined ? 1 : 0) + (variable.valueFrom !== undefined ? 1 : 0);
        if (sources !== 1) problems.push(`${where}: env '${variable.name}' needs exactly one of value and valueFrom`);
        if (variable.valueFrom) {
          const ref = variable.valueFrom;
          const kinds = ['secretKeyRef', 'configMapKeyRef', 'fieldRef'].filter((k) => ref[k] !== undefined);
          if (kinds.length !== 1) problems.push(`${where}: env '${variable.name}': valueFrom needs exactly one source`);
          if (ref.secretKeyRef) {
            const secret = secrets.get(ref.secretKeyRef.name);
            if (!secret) problems.push(`${where}: env '${variable.name}': Secret '${ref.secretKeyRef.name}' is not defined`);
            else if (!secretKeys(secret).includes(ref.secretKeyRef.key)) problems.push(`${where}: env '${variable.name}': Secret '${ref.secretKeyRef.name}' has no key '${ref.secretKeyRef.key}'`);
          }
          if (ref.configMapKeyRef) {
            const map = configMaps.get(ref.configMapKeyRef.name);
            if (!map) problems.push(`${where}: env '${variable.name}': ConfigMap '${ref.configMapKeyRef.name}' is not defined`);
            else if (!(ref.configMapKeyRef.key in (map.data ?? {}))) problems.push(`${where}: env '${variable.name}': ConfigMap '${ref.configMapKeyRef.name}' has no key '${ref.configMapKeyRef.key}'`);
          }
        }
        for (const ref of references(variable.value ?? '')) {
          if (!defined.includes(ref)) problems.push(`${where}: env '${variable.name}' uses $(${ref}), which is not defined before it (it would stay literal)`);
          referenced.add(ref);
        }
        defined.push(variable.name);
      }
      for (const variable of env) {
        if (variable.name.startsWith('TIDEPOOL_')) {
          if (!known.has(variable.name)) problems.push(`${where}: env '${variable.name}' is not a Tidepool setting (apps/api/src/config.ts)`);
        } else if (!referenced.has(variable.name)) {
          problems.push(`${where}: env '${variable.name}' is neither a Tidepool setting nor used in another variable's value`);
        }
      }
    }
    for (const volume of volumes.keys()) if (!mounted.has(volume)) problems.push(`${name}: volume '${volume}' is mounted by no container`);
  }

  // 4. Services: a selector that selects a workload, and target ports that its containers declare.
  for (const service of valid.filter((o) => o.kind === 'Service') as Any[]) {
    const name = id(service);
    const spec = service.spec;
    if (spec.type === 'ExternalName') {
      if (!spec.externalName) problems.push(`${name}: type ExternalName needs externalName`);
      if (spec.selector) problems.push(`${name}: an ExternalName Service selects no pods`);
      continue;
    }
    if (!spec.selector || Object.keys(spec.selector).length === 0) {
      problems.push(`${name}: has no selector`);
      continue;
    }
    const selected = workloads(valid).filter((w) => matches(spec.selector, (w as Any).spec.template.metadata.labels));
    if (selected.length === 0) problems.push(`${name}: selector matches no Deployment or DaemonSet`);
    if (!spec.ports || spec.ports.length === 0) problems.push(`${name}: has no ports`);
    for (const port of spec.ports ?? []) {
      const target = port.targetPort ?? port.port;
      for (const workload of selected) {
        const declared = containersOf(workload).flatMap((c) => (c.ports ?? []) as Any[]);
        const found = declared.some((p) => (typeof target === 'number' ? p.containerPort === target : p.name === target));
        if (!found) problems.push(`${name}: targetPort ${JSON.stringify(target)} is not a port of ${id(workload)}'s containers`);
      }
    }
  }

  // 5. RBAC: bindings to defined roles and accounts; no wildcard, no secrets, no privilege escalation verbs.
  for (const binding of valid.filter((o) => o.kind === 'RoleBinding') as Any[]) {
    const name = id(binding);
    if (binding.roleRef.kind !== 'Role') problems.push(`${name}: binds a ClusterRole (bind a namespaced Role)`);
    else if (!roles.has(binding.roleRef.name)) problems.push(`${name}: Role '${binding.roleRef.name}' is not defined`);
    for (const subject of binding.subjects) {
      if (subject.kind !== 'ServiceAccount') problems.push(`${name}: binds ${subject.kind} '${subject.name}' (only the platform's ServiceAccounts)`);
      else if (!serviceAccounts.has(subject.name)) problems.push(`${name}: ServiceAccount '${subject.name}' is not defined`);
      else if (subject.namespace !== undefined && subject.namespace !== binding.metadata.namespace) problems.push(`${name}: ServiceAccount '${subject.name}' is in another namespace`);
    }
  }
  for (const role of roles.values()) {
    for (const rule of role.rules as Any[]) {
      const all = [...rule.apiGroups, ...rule.resources, ...rule.verbs];
      if (all.includes('*')) problems.push(`${id(role)}: a rule uses '*' (name groups, resources and verbs)`);
      if (rule.resources.some((r: string) => r === 'secrets' || r.startsWith('pods/exec'))) problems.push(`${id(role)}: grants access to ${rule.resources.join(', ')}`);
      if (rule.verbs.some((v: string) => ['escalate', 'bind', 'impersonate'].includes(v))) problems.push(`${id(role)}: grants ${rule.verbs.join(', ')}`);
    }
  }
  return problems;
}

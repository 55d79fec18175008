/**
 * A small kustomize renderer for deploy/kubernetes: exactly the kustomization fields those manifests use
 * (`namespace`, `resources` as files, `images`, `generatorOptions` with fixed names, `secretGenerator` from
 * files), and a clear error for anything else, so a field it does not understand is never silently dropped.
 * Secret values are not read (the files are the operator's, and git-ignored): a generated Secret carries its
 * keys with empty values, which is what the structural check needs. `kubectl kustomize` renders the real thing
 * where kubectl is installed (the test compares the two).
 */
import { readFileSync } from 'node:fs';
import { basename, isAbsolute, join, normalize } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
};

export class KustomizeError extends Error {}

/** Kinds that are not namespaced (the renderer sets `namespace` on every other object). */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'CustomResourceDefinition']);

const KNOWN_FIELDS = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'images', 'generatorOptions', 'secretGenerator']);

interface ImageRule {
  name: string;
  newName?: string;
  newTag?: string;
}

interface SecretGenerator {
  name: string;
  type?: string;
  files?: string[];
}

/** Like kustomize's default load restrictor: files only inside the kustomization's directory. */
function insideRoot(path: string): boolean {
  return !isAbsolute(path) && !normalize(path).split('/').includes('..');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses every YAML document of a file; a YAML error or a non-object document is refused with the file named. */
export function parseManifestFile(file: string): KubeObject[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  const objects: KubeObject[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new KustomizeError(`${file}: ${doc.errors[0].message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    if (!isRecord(value)) throw new KustomizeError(`${file}: a document is not a mapping`);
    objects.push(value as KubeObject);
  }
  return objects;
}

/** `image` with the kustomization's `images` rule for its name applied (name = the part before `:` or `@`). */
function renameImage(image: string, rules: ImageRule[]): string {
  const at = image.indexOf('@');
  const colon = image.lastIndexOf(':');
  const slash = image.lastIndexOf('/');
  const end = at >= 0 ? at : colon > slash ? colon : image.length;
  const name = image.slice(0, end);
  const rule = rules.find((r) => r.name === name);
  if (!rule) return image;
  const tag = rule.newTag !== undefined ? `:${rule.newTag}` : image.slice(end);
  return `${rule.newName ?? name}${tag}`;
}

function podSpecOf(object: KubeObject): Record<string, unknown> | undefined {
  const spec = object.spec;
  if (!isRecord(spec) || !isRecord(spec.template)) return undefined;
  const podSpec = spec.template.spec;
  return isRecord(podSpec) ? podSpec : undefined;
}

function secretFromGenerator(gen: SecretGenerator, labels: Record<string, string>): KubeObject {
  if (typeof gen.name !== 'string' || gen.name === '') throw new KustomizeError('secretGenerator: an entry has no name');
  for (const key of Object.keys(gen)) {
    if (!['name', 'type', 'files'].includes(key)) throw new KustomizeError(`secretGenerator ${gen.name}: field '${key}' is not supported by this renderer`);
  }
  const data: Record<string, string> = {};
  for (const entry of gen.files ?? []) {
    const [key, path] = entry.includes('=') ? entry.split('=', 2) : [basename(entry), entry];
    if (!key || !path) throw new KustomizeError(`secretGenerator ${gen.name}: malformed file entry '${entry}'`);
    if (key in data) throw new KustomizeError(`secretGenerator ${gen.name}: key '${key}' given twice`);
    if (!insideRoot(path)) throw new KustomizeError(`secretGenerator ${gen.name}: file '${path}' is outside the kustomization's directory`);
    data[key] = '';
  }
  const secret: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: gen.name, ...(Object.keys(labels).length > 0 ? { labels: { ...labels } } : {}) }, data };
  secret.type = gen.type ?? 'Opaque';
  return secret;
}

/** Renders `<dir>/kustomization.yaml` into the list of objects `kubectl kustomize <dir>` would print. */
export function renderKustomization(dir: string): KubeObject[] {
  const [kustomization] = parseManifestFile(join(dir, 'kustomization.yaml')) as unknown as Record<string, unknown>[];
  if (!kustomization) throw new KustomizeError(`${dir}/kustomization.yaml is empty`);
  if (kustomization.kind !== 'Kustomization' || kustomization.apiVersion !== 'kustomize.config.k8s.io/v1beta1') {
    throw new KustomizeError('kustomization.yaml: expected apiVersion kustomize.config.k8s.io/v1beta1, kind Kustomization');
  }
  for (const key of Object.keys(kustomization)) {
    if (!KNOWN_FIELDS.has(key)) throw new KustomizeError(`kustomization.yaml: field '${key}' is not supported by this renderer`);
  }
  const namespace = kustomization.namespace as string | undefined;
  const images = (kustomization.images ?? []) as ImageRule[];
  const options = (kustomization.generatorOptions ?? {}) as { disableNameSuffixHash?: boolean; labels?: Record<string, string> };
  const generators = (kustomization.secretGenerator ?? []) as SecretGenerator[];
  if (generators.length > 0 && options.disableNameSuffixHash !== true) {
    throw new KustomizeError('kustomization.yaml: generated names with a hash suffix are not supported by this renderer (set generatorOptions.disableNameSuffixHash)');
  }
  const resources = kustomization.resources;
  if (!Array.isArray(resources) || resources.length === 0) throw new KustomizeError('kustomization.yaml: resources must list the manifest files');
  const objects: KubeObject[] = [];
  for (const resource of resources) {
    if (typeof resource !== 'string' || !/\.ya?ml$/.test(resource) || resource.includes('://')) {
      throw new KustomizeError(`kustomization.yaml: resource '${String(resource)}' is not a local YAML file (the only kind this renderer reads)`);
    }
    if (!insideRoot(resource)) throw new KustomizeError(`kustomization.yaml: resource '${resource}' is outside the kustomization's directory`);
    objects.push(...parseManifestFile(join(dir, resource)));
  }
  for (const gen of generators) objects.push(secretFromGenerator(gen, options.labels ?? {}));
  for (const object of objects) {
    if (!isRecord(object.metadata)) continue;
    if (namespace && !CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = namespace;
    if (namespace && (object.kind === 'RoleBinding' || object.kind === 'ClusterRoleBinding') && Array.isArray(object.subjects)) {
      for (const subject of object.subjects as Record<string, unknown>[]) {
        if (subject.kind === 'ServiceAccount' && subject.namespace === undefined) subject.namespace = namespace;
      }
    }
    const podSpec = podSpecOf(object);
    for (const list of ['containers', 'initContainers']) {
      const containers = podSpec?.[list];
      if (!Array.isArray(containers)) continue;
      for (const container of containers as Record<string, unknown>[]) {
        if (typeof container.image === 'string') container.image = renameImage(container.image, images);
      }
    }
  }
  return objects;
}

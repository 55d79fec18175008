import { conflict, invalid, notFound, PlatformError } from '../errors.ts';
import {
  BASE_DEFAULTS,
  type BuildRecord,
  DEFAULT_TAG,
  type ResolvedTemplate,
  type SandboxDefaults,
  type TemplateRecord,
} from './template-model.ts';
import { newBuildId, newTemplateId, parseReference, requestedTags, taggedName, type TemplateReference } from './template-names.ts';
import type { TemplateStore } from './template-store.ts';

export const BASE_TEMPLATE_ID = 'base';
/** The code-interpreter template: id `code-interpreter`, name `code-interpreter-v1` (the SDK's default). */
export const CODE_INTERPRETER_TEMPLATE_ID = 'code-interpreter';
export const CODE_INTERPRETER_TEMPLATE_NAME = 'code-interpreter-v1';
/** The desktop template of `@e2b/desktop` (its default): id and name `desktop`. */
export const DESKTOP_TEMPLATE_ID = 'desktop';
/** Names (ids and aliases) of the platform's own templates: not buildable, snapshottable or deletable by users. */
export const BUILTIN_TEMPLATE_NAMES: readonly string[] = [BASE_TEMPLATE_ID, CODE_INTERPRETER_TEMPLATE_ID, CODE_INTERPRETER_TEMPLATE_NAME, DESKTOP_TEMPLATE_ID];

/** A template the platform ships (base, code-interpreter): one build, always ready, refreshed at every start. */
export interface BuiltinTemplateInput {
  templateId: string;
  alias: string;
  image: string;
  envdVersion: string;
  defaults: SandboxDefaults;
  /** Resources for a first registration; a template registered before keeps its own. */
  cpuCount: number;
  memoryMB: number;
}

export interface RegisterBuildInput {
  /** The registering key's team: the template's owner (a name another team owns is refused). */
  teamId: string;
  /** `name[:tag]`; a name that exists adds a build to that template. */
  name: string;
  tags?: string[];
  cpuCount: number;
  memoryMB: number;
}

export interface RegisteredBuild {
  template: TemplateRecord;
  build: BuildRecord;
}

export interface SnapshotInput {
  /** The sandbox's team: the snapshot's owner. */
  teamId: string;
  sourceSandboxId: string;
  /** `name[:tag]`; absent = a new unnamed snapshot template. */
  name: string | undefined;
  image: string;
  envdVersion: string;
  defaults: SandboxDefaults;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
}

export interface SnapshotInfo {
  snapshotID: string;
  names: string[];
}

const nowIso = (): string => new Date().toISOString();

/**
 * How a team reaches a template: `use` (start sandboxes from it, look its alias up): its own, the built-ins and any
 * team's public ones (those by template id or `<teamID>/name` only: see TemplateCatalog.named); `read` (details, builds, logs, tags): its own and the built-ins; `write`: its own only.
 */
export type TemplateAccess = 'use' | 'read' | 'write';

export function mayAccess(template: TemplateRecord, teamId: string, access: TemplateAccess): boolean {
  if (template.teamId === teamId) return true;
  if (access === 'write') return false;
  return template.teamId === null || (access === 'use' && template.public);
}

/** The names a template is known by to its own team (other teams write `<teamID>/name`). */
export const namesOf = (template: TemplateRecord): string[] => (template.alias ? [template.alias] : []);

/**
 * Templates as a domain: names and tags, which build a reference means, registering builds and
 * snapshots. Images and running builds are someone else's (the build queue, the lifecycle).
 */
export class TemplateCatalog {
  /** Image builds of built-in templates running in this process (see awaitBuiltinBuild). */
  private readonly builtinBuilds = new Map<string, Promise<void>>();

  constructor(private readonly store: TemplateStore) {}

  /** Finds a template by id or name that `teamId` may access so; throws not_found (another team's answers as a missing one). */
  async require(idOrName: string, teamId: string, access: TemplateAccess = 'read'): Promise<TemplateRecord> {
    const template = await this.find(idOrName, teamId, access);
    if (!template) throw notFound(`template '${idOrName}' not found`);
    return template;
  }

  /** A template by id or name, if `teamId` may access it so. */
  async find(idOrName: string, teamId: string, access: TemplateAccess = 'read'): Promise<TemplateRecord | undefined> {
    const template = await this.named(parseReference(idOrName), teamId);
    return template && mayAccess(template, teamId, access) ? template : undefined;
  }

  /**
   * The template a reference names for `teamId`. By id: that template (a namespace, if any, must be its team's). By
   * name: the caller's own or a built-in; another team's only as `<teamID>/name`, so no team can put a template
   * (`desktop`, …) in front of other teams under a bare name.
   */
  private async named(reference: TemplateReference, teamId: string): Promise<TemplateRecord | undefined> {
    const byId = await this.store.template(reference.name);
    if (byId) return reference.namespace === undefined || reference.namespace === byId.teamId ? byId : undefined;
    const byName = await this.store.templateByAlias(reference.name);
    if (!byName) return undefined;
    if (reference.namespace === undefined) return byName.teamId === null || byName.teamId === teamId ? byName : undefined;
    return reference.namespace === byName.teamId ? byName : undefined;
  }

  /** A template by id or name whatever its team: for the platform's own use (signed uploads, the warm pool), never a caller's. */
  async findAnyTeam(idOrName: string): Promise<TemplateRecord | undefined> {
    const { name } = parseReference(idOrName);
    return (await this.store.template(name)) ?? (await this.store.templateByAlias(name));
  }

  /** The ready build a sandbox reference (`name[:tag]`, `templateID[:tag]`, snapshot ID) starts from, for a sandbox of `teamId`. */
  resolve(reference: string, teamId: string, access: TemplateAccess = 'use'): Promise<ResolvedTemplate> {
    return this.resolveVisible(reference, async (parsed) => {
      const template = await this.named(parsed, teamId);
      return template && mayAccess(template, teamId, access) ? template : undefined;
    });
  }

  /** `resolve` whatever the template's team: for the platform's own use (the warm pool), never a caller's. */
  resolveAnyTeam(reference: string): Promise<ResolvedTemplate> {
    return this.resolveVisible(reference, async ({ name }) => (await this.store.template(name)) ?? (await this.store.templateByAlias(name)));
  }

  private async resolveVisible(reference: string, lookup: (parsed: TemplateReference) => Promise<TemplateRecord | undefined>): Promise<ResolvedTemplate> {
    let parsed;
    try {
      parsed = parseReference(reference);
    } catch (error) {
      if (error instanceof PlatformError) throw notFound(`template '${reference}' not found`);
      throw error;
    }
    const template = await lookup(parsed);
    if (!template) {
      if (parsed.name === CODE_INTERPRETER_TEMPLATE_ID || parsed.name === CODE_INTERPRETER_TEMPLATE_NAME) {
        throw notFound(`template '${reference}' is not available on this platform: its image was not found at start; build it with 'bash scripts/build-images.sh' (or set TIDEPOOL_CODE_INTERPRETER_IMAGE) and restart the platform`);
      }
      if (parsed.name === DESKTOP_TEMPLATE_ID) {
        throw notFound(`template '${reference}' is not offered on this platform: TIDEPOOL_DESKTOP_IMAGE is empty, or no node with an engine has registered it yet`);
      }
      throw notFound(`template '${reference}' not found: the templates available are the base template ('base') and the ones built or snapshotted on this platform`);
    }
    const tag = parsed.tag ?? DEFAULT_TAG;
    const buildId = (await this.store.taggedBuild(template.templateId, tag)) ?? (parsed.tag === undefined ? (await this.latestReady(template.templateId))?.buildId : undefined);
    if (!buildId) throw notFound(`template '${parsed.name}' has no build tagged '${tag}'`);
    let build = await this.store.build(buildId);
    const imageBuild = build?.status === 'building' ? this.builtinBuilds.get(template.templateId) : undefined;
    if (imageBuild && BUILTIN_TEMPLATE_NAMES.includes(template.templateId)) {
      // Its image is being built by this process: the create waits for it, then sees the result.
      await imageBuild;
      build = await this.store.build(buildId);
    }
    if (build?.status === 'error' && build.reason && BUILTIN_TEMPLATE_NAMES.includes(template.templateId)) {
      throw notFound(`template '${parsed.name}' is not available: ${build.reason.message}`);
    }
    if (build?.status === 'building' && BUILTIN_TEMPLATE_NAMES.includes(template.templateId)) {
      throw notFound(`template '${parsed.name}' is not available yet: its image is being built by another API process; try again in a few minutes`);
    }
    if (!build || build.status !== 'ready' || !build.image) throw notFound(`template '${parsed.name}:${tag}' has no finished build yet`);
    return { template, build, tag };
  }

  /**
   * The images of the ready builds of `teamId`'s templates and snapshots and of the built-in templates: the platform
   * images a build of that team may name as `fromImage` (undefined team: the built-ins' only).
   */
  async imagesUsableBy(teamId: string | undefined): Promise<string[]> {
    const images: string[] = [];
    for (const template of await this.store.templates()) {
      if (template.teamId !== null && template.teamId !== teamId) continue;
      for (const build of await this.store.builds(template.templateId)) if (build.status === 'ready' && build.image) images.push(build.image);
    }
    return images;
  }

  recordSpawn(templateId: string): Promise<void> {
    return this.store.recordSpawn(templateId);
  }

  async latestReady(templateId: string): Promise<BuildRecord | undefined> {
    return (await this.store.builds(templateId)).find((b) => b.status === 'ready');
  }

  /** Registers (or refreshes) the built-in `base` template on the platform's base image. */
  async registerBase(image: string, envdVersion: string): Promise<void> {
    await this.registerBuiltin({ templateId: BASE_TEMPLATE_ID, alias: BASE_TEMPLATE_ID, image, envdVersion, defaults: BASE_DEFAULTS, cpuCount: 2, memoryMB: 1024 });
  }

  /** Registers (or refreshes) a built-in template: its only build (id = template id) points at `image`. */
  registerBuiltin(input: BuiltinTemplateInput): Promise<void> {
    return this.saveBuiltin(input, 'ready');
  }

  /**
   * A built-in template whose image is being built (builtin-image-builds.ts): listed as `building`, `progress` the
   * first line of its build log; creates wait for the build (see awaitBuiltinBuild).
   */
  async registerBuiltinBuilding(input: Omit<BuiltinTemplateInput, 'image' | 'envdVersion'>, progress: string): Promise<void> {
    await this.saveBuiltin({ ...input, image: null, envdVersion: null }, 'building');
    await this.store.clearLogs(input.templateId);
    await this.store.appendLog(input.templateId, 'info', progress);
  }

  /** Where a built-in template's image build is running: creates of it wait for `done` (resolved either way). */
  awaitBuiltinBuild(templateId: string, done: Promise<void>): void {
    this.builtinBuilds.set(templateId, done);
    void done.finally(() => {
      if (this.builtinBuilds.get(templateId) === done) this.builtinBuilds.delete(templateId);
    });
  }

  /** A line of a built-in template's image build (its build log: GET /templates/{id}/builds/{id}/status, the dashboard). */
  appendBuiltinLog(templateId: string, level: 'info' | 'error', message: string): Promise<void> {
    return this.store.appendLog(templateId, level, message);
  }

  private async saveBuiltin(input: Omit<BuiltinTemplateInput, 'image' | 'envdVersion'> & { image: string | null; envdVersion: string | null }, status: 'ready' | 'building'): Promise<void> {
    const now = nowIso();
    const { templateId } = input;
    await this.store.atomically(async (store) => {
      const existing = await store.template(templateId);
      const cpuCount = existing?.cpuCount ?? input.cpuCount;
      const memoryMB = existing?.memoryMB ?? input.memoryMB;
      await store.saveTemplate({
        templateId,
        teamId: null,
        alias: input.alias,
        kind: 'template',
        public: true,
        cpuCount,
        memoryMB,
        diskSizeMB: 0,
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
        spawnCount: existing?.spawnCount ?? 0,
        lastSpawnedAt: existing?.lastSpawnedAt ?? null,
        sourceSandboxId: null,
      });
      const build = await store.build(templateId);
      await store.saveBuild({
        buildId: templateId,
        templateId,
        status,
        image: input.image,
        cpuCount,
        memoryMB,
        diskSizeMB: 0,
        envdVersion: status === 'ready' ? input.envdVersion : null,
        defaults: input.defaults,
        spec: null,
        reason: null,
        requestedTags: [DEFAULT_TAG],
        createdAt: build?.createdAt ?? now,
        updatedAt: now,
        finishedAt: status === 'ready' ? (build?.finishedAt ?? now) : null,
      });
      await store.setTag(templateId, DEFAULT_TAG, templateId);
    });
  }

  /**
   * A built-in template whose image is gone (registered by an earlier start): its build is marked failed with
   * `why`, so creating a sandbox from it answers 404 with that instead of failing in the engine.
   */
  async withdrawBuiltin(templateId: string, why: string): Promise<void> {
    const build = await this.store.build(templateId);
    if (!build || !BUILTIN_TEMPLATE_NAMES.includes(templateId)) return;
    await this.store.saveBuild({ ...build, status: 'error', reason: { message: why }, updatedAt: nowIso() });
  }

  /** `POST /v3/templates`, `POST /v2/templates`: a template (new, or the one of that name) with a build waiting for its steps. */
  async registerBuild(input: RegisterBuildInput): Promise<RegisteredBuild> {
    const { teamId } = input;
    const { name, tag } = parseReference(input.name);
    const tags = requestedTags(tag, input.tags);
    if (BUILTIN_TEMPLATE_NAMES.includes(name)) throw invalid(`'${name}' is a built-in template; choose another name`);
    return this.store.atomically(async (store) => {
      const now = nowIso();
      const existing = (await store.templateByAlias(name)) ?? (await store.template(name));
      // Names are one namespace across teams (as template IDs are): another team's name is taken, never joined.
      if (existing && existing.teamId !== teamId) throw conflict(`the name '${name}' is taken; choose another`);
      if (existing && existing.kind !== 'template') throw conflict(`'${name}' is a snapshot, not a template`);
      const template: TemplateRecord = existing
        ? { ...existing, cpuCount: input.cpuCount, memoryMB: input.memoryMB, updatedAt: now }
        : {
            templateId: newTemplateId(),
            teamId,
            alias: name,
            kind: 'template',
            public: false,
            cpuCount: input.cpuCount,
            memoryMB: input.memoryMB,
            diskSizeMB: 0,
            createdAt: now,
            updatedAt: now,
            spawnCount: 0,
            lastSpawnedAt: null,
            sourceSandboxId: null,
          };
      const build: BuildRecord = {
        buildId: newBuildId(),
        templateId: template.templateId,
        status: 'waiting',
        image: null,
        cpuCount: input.cpuCount,
        memoryMB: input.memoryMB,
        diskSizeMB: 0,
        envdVersion: null,
        defaults: BASE_DEFAULTS,
        spec: null,
        reason: null,
        requestedTags: tags,
        createdAt: now,
        updatedAt: now,
        finishedAt: null,
      };
      await store.saveTemplate(template);
      await store.saveBuild(build);
      return { template, build };
    });
  }

  /** A build of the template, or not_found (the reference answers 400 for an unknown build on status polls; callers choose). */
  async requireBuild(templateId: string, buildId: string): Promise<BuildRecord> {
    const build = await this.store.build(buildId);
    if (!build || build.templateId !== templateId) throw notFound(`Build '${buildId}' not found`);
    return build;
  }

  /** Records a finished build: image, defaults, and its tags now point at it. */
  async markReady(build: BuildRecord, result: { image: string; envdVersion: string; defaults: SandboxDefaults; images: string[] }): Promise<BuildRecord> {
    const now = nowIso();
    const ready: BuildRecord = { ...build, status: 'ready', image: result.image, envdVersion: result.envdVersion, defaults: result.defaults, updatedAt: now, finishedAt: now };
    await this.store.atomically(async (store) => {
      await store.saveBuild(ready);
      await store.addBuildImages(build.buildId, [...new Set([result.image, ...result.images])]);
      for (const tag of build.requestedTags) await store.setTag(build.templateId, tag, build.buildId);
      const template = await store.template(build.templateId);
      if (template) await store.saveTemplate({ ...template, updatedAt: now });
    });
    return ready;
  }

  async markFailed(build: BuildRecord, reason: { message: string; step?: string }): Promise<BuildRecord> {
    const now = nowIso();
    const failed: BuildRecord = { ...build, status: 'error', reason, updatedAt: now, finishedAt: now };
    await this.store.saveBuild(failed);
    return failed;
  }

  /** `POST /templates/tags`: `target` is `name:tag` (or `name`, meaning its default build). */
  async assignTags(target: string, tags: string[], teamId: string): Promise<{ buildId: string; tags: string[] }> {
    const resolved = await this.resolve(target, teamId, 'write');
    const clean = requestedTags(undefined, tags);
    if (tags.length === 0) throw invalid('tags must name at least one tag');
    await this.store.atomically(async (store) => {
      for (const tag of clean) await store.setTag(resolved.template.templateId, tag, resolved.build.buildId);
    });
    return { buildId: resolved.build.buildId, tags: clean };
  }

  /** `DELETE /templates/tags`. */
  async removeTags(name: string, tags: string[], teamId: string): Promise<void> {
    const template = await this.require(name, teamId, 'write');
    if (tags.length === 0) throw invalid('tags must name at least one tag');
    await this.store.atomically(async (store) => {
      const missing: string[] = [];
      for (const tag of tags) if ((await store.taggedBuild(template.templateId, tag)) === undefined) missing.push(tag);
      if (missing.length > 0) throw notFound(`template '${name}' has no tag ${missing.map((t) => `'${t}'`).join(', ')}`);
      for (const tag of tags) await store.removeTag(template.templateId, tag);
    });
  }

  async setPublic(idOrName: string, isPublic: boolean, teamId: string): Promise<TemplateRecord> {
    const template = await this.require(idOrName, teamId, 'write');
    const updated = { ...template, public: isPublic, updatedAt: nowIso() };
    await this.store.saveTemplate(updated);
    return updated;
  }

  /** Turns a committed sandbox filesystem into a snapshot template (or a new build of the named one). */
  async registerSnapshot(input: SnapshotInput): Promise<SnapshotInfo> {
    const parsed = input.name === undefined ? undefined : parseReference(input.name);
    const tag = parsed?.tag ?? DEFAULT_TAG;
    return this.store.atomically(async (store) => {
      const now = nowIso();
      const existing = parsed ? ((await store.templateByAlias(parsed.name)) ?? (await store.template(parsed.name))) : undefined;
      if (parsed && BUILTIN_TEMPLATE_NAMES.includes(parsed.name)) throw invalid(`'${parsed.name}' is a built-in template; choose another snapshot name`);
      if (parsed && existing && existing.teamId !== input.teamId) throw conflict(`the name '${parsed.name}' is taken; choose another snapshot name`);
      const template: TemplateRecord = existing
        ? { ...existing, updatedAt: now }
        : {
            templateId: newTemplateId(),
            teamId: input.teamId,
            alias: parsed?.name ?? null,
            kind: 'snapshot',
            public: false,
            cpuCount: input.cpuCount,
            memoryMB: input.memoryMB,
            diskSizeMB: input.diskSizeMB,
            createdAt: now,
            updatedAt: now,
            spawnCount: 0,
            lastSpawnedAt: null,
            sourceSandboxId: input.sourceSandboxId,
          };
      const build: BuildRecord = {
        buildId: newBuildId(),
        templateId: template.templateId,
        status: 'ready',
        image: input.image,
        cpuCount: input.cpuCount,
        memoryMB: input.memoryMB,
        diskSizeMB: input.diskSizeMB,
        envdVersion: input.envdVersion,
        defaults: input.defaults,
        spec: null,
        reason: null,
        requestedTags: [tag],
        createdAt: now,
        updatedAt: now,
        finishedAt: now,
      };
      await store.saveTemplate(template);
      await store.saveBuild(build);
      await store.addBuildImages(build.buildId, [input.image]);
      await store.setTag(template.templateId, tag, build.buildId);
      return this.snapshotInfo(template, tag);
    });
  }

  snapshotInfo(template: TemplateRecord, tag: string): SnapshotInfo {
    const name = taggedName(template.alias ?? template.templateId, tag);
    return { snapshotID: name, names: template.alias ? [name] : [] };
  }

  /** Every snapshot (template × tag), oldest first, optionally of one sandbox or one name. */
  async snapshots(filter: { teamId: string; sandboxId?: string; name?: string }): Promise<Array<SnapshotInfo & { createdAt: string; key: string }>> {
    const wanted = filter.name === undefined ? undefined : parseReference(filter.name);
    const found: Array<SnapshotInfo & { createdAt: string; key: string }> = [];
    for (const template of await this.store.templates('snapshot')) {
      if (template.teamId !== filter.teamId) continue;
      if (filter.sandboxId !== undefined && template.sourceSandboxId !== filter.sandboxId) continue;
      if (wanted && wanted.name !== template.alias && wanted.name !== template.templateId) continue;
      for (const { tag, createdAt } of await this.store.tags(template.templateId)) {
        if (wanted?.tag !== undefined && wanted.tag !== tag) continue;
        found.push({ ...this.snapshotInfo(template, tag), createdAt, key: `${template.templateId}:${tag}` });
      }
    }
    return found.sort((a, b) => (a.createdAt === b.createdAt ? (a.key < b.key ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1));
  }

  /**
   * What `DELETE /templates/{ref}` removes: with a tag on a template that has other tags, that tag
   * (and its build when nothing else points at it); otherwise the whole template.
   */
  async deletionScope(reference: string, teamId: string): Promise<{ template: TemplateRecord; builds: BuildRecord[]; wholeTemplate: boolean; tag: string | undefined }> {
    const readable = await this.require(reference, teamId, 'read');
    if (BUILTIN_TEMPLATE_NAMES.includes(readable.templateId)) throw invalid(`the built-in '${readable.alias ?? readable.templateId}' template cannot be deleted`);
    const template = await this.require(reference, teamId, 'write');
    const { tag } = parseReference(reference);
    const tags = await this.store.tags(template.templateId);
    if (tag !== undefined && tags.length > 1) {
      const buildId = await this.store.taggedBuild(template.templateId, tag);
      if (!buildId) throw notFound(`template '${reference}' not found`);
      const stillTagged = tags.some((t) => t.tag !== tag && t.buildId === buildId);
      const build = await this.store.build(buildId);
      return { template, builds: stillTagged || !build ? [] : [build], wholeTemplate: false, tag };
    }
    return { template, builds: await this.store.builds(template.templateId), wholeTemplate: true, tag };
  }
}

import { namesOf } from './template-catalog.ts';
import type { BuildLogEntry, BuildRecord, TemplateRecord } from './template-model.ts';

/** `Template`: lists, `POST /v2/templates`. */
export function templateView(template: TemplateRecord, builds: BuildRecord[]) {
  const latest = builds[0];
  const lastReady = builds.find((b) => b.status === 'ready');
  const shown = lastReady ?? latest;
  return {
    templateID: template.templateId,
    buildID: shown?.buildId ?? '',
    cpuCount: shown?.cpuCount ?? template.cpuCount,
    memoryMB: shown?.memoryMB ?? template.memoryMB,
    diskSizeMB: shown?.diskSizeMB ?? template.diskSizeMB,
    public: template.public,
    aliases: namesOf(template),
    names: namesOf(template),
    createdAt: template.createdAt,
    updatedAt: template.updatedAt,
    createdBy: null,
    lastSpawnedAt: template.lastSpawnedAt,
    spawnCount: template.spawnCount,
    buildCount: builds.filter((b) => b.status === 'ready').length,
    envdVersion: lastReady?.envdVersion ?? '',
    buildStatus: latest?.status ?? 'ready',
  };
}

/** `TemplateBuild`: an element of `TemplateWithBuilds.builds`. */
export function buildView(build: BuildRecord) {
  return {
    buildID: build.buildId,
    status: build.status,
    createdAt: build.createdAt,
    updatedAt: build.updatedAt,
    finishedAt: build.finishedAt ?? undefined,
    cpuCount: build.cpuCount,
    memoryMB: build.memoryMB,
    diskSizeMB: build.diskSizeMB,
    envdVersion: build.envdVersion ?? undefined,
  };
}

/** `TemplateBuildInfo`: the status poll. */
export function buildStatusView(build: BuildRecord, logEntries: BuildLogEntry[], reasonEntries: BuildLogEntry[]) {
  return {
    templateID: build.templateId,
    buildID: build.buildId,
    status: build.status,
    logEntries,
    logs: [] as string[],
    ...(build.status === 'error' && build.reason ? { reason: { ...build.reason, logEntries: reasonEntries } } : {}),
  };
}

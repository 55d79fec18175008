import type { Sql, SqlValue } from '../store/sql.ts';
import type { BuildLogEntry, BuildRecord, BuildSpec, BuildStatus, LogLevel, TemplateRecord } from './template-model.ts';

interface TemplateRow {
  template_id: string;
  team_id: string | null;
  alias: string | null;
  kind: TemplateRecord['kind'];
  public: number;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  created_at: string;
  updated_at: string;
  spawn_count: number;
  last_spawned_at: string | null;
  source_sandbox_id: string | null;
}

interface BuildRow {
  build_id: string;
  template_id: string;
  status: BuildStatus;
  image: string | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  envd_version: string | null;
  defaults: string;
  spec: string | null;
  reason: string | null;
  requested_tags: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

const templateFromRow = (row: TemplateRow): TemplateRecord => ({
  templateId: row.template_id,
  teamId: row.team_id,
  alias: row.alias,
  kind: row.kind,
  public: row.public === 1,
  cpuCount: row.cpu_count,
  memoryMB: row.memory_mb,
  diskSizeMB: row.disk_size_mb,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  spawnCount: row.spawn_count,
  lastSpawnedAt: row.last_spawned_at,
  sourceSandboxId: row.source_sandbox_id,
});

const buildFromRow = (row: BuildRow): BuildRecord => ({
  buildId: row.build_id,
  templateId: row.template_id,
  status: row.status,
  image: row.image,
  cpuCount: row.cpu_count,
  memoryMB: row.memory_mb,
  diskSizeMB: row.disk_size_mb,
  envdVersion: row.envd_version,
  defaults: JSON.parse(row.defaults) as BuildRecord['defaults'],
  spec: row.spec === null ? null : (JSON.parse(row.spec) as BuildRecord['spec']),
  reason: row.reason === null ? null : (JSON.parse(row.reason) as BuildRecord['reason']),
  requestedTags: JSON.parse(row.requested_tags) as string[],
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  finishedAt: row.finished_at,
});

const templateToRow = (t: TemplateRecord): TemplateRow => ({
  template_id: t.templateId,
  team_id: t.teamId,
  alias: t.alias,
  kind: t.kind,
  public: t.public ? 1 : 0,
  cpu_count: t.cpuCount,
  memory_mb: t.memoryMB,
  disk_size_mb: t.diskSizeMB,
  created_at: t.createdAt,
  updated_at: t.updatedAt,
  spawn_count: t.spawnCount,
  last_spawned_at: t.lastSpawnedAt,
  source_sandbox_id: t.sourceSandboxId,
});

/**
 * A build's spec as stored: `fromImageRegistry` (registry passwords, cloud keys) never is. The running build has them
 * in memory (BuildJob.spec) and nothing reads them back: a build interrupted by a restart fails and is started anew.
 */
const specToColumn = (spec: BuildSpec | null): string | null => (spec === null ? null : JSON.stringify({ ...spec, fromImageRegistry: null }));

/** What a stored spec looks like when it still holds credentials (rows written before specToColumn dropped them). */
const SPEC_WITH_CREDENTIALS = '%"fromImageRegistry":{%';

const buildToRow = (b: BuildRecord): BuildRow => ({
  build_id: b.buildId,
  template_id: b.templateId,
  status: b.status,
  image: b.image,
  cpu_count: b.cpuCount,
  memory_mb: b.memoryMB,
  disk_size_mb: b.diskSizeMB,
  envd_version: b.envdVersion,
  defaults: JSON.stringify(b.defaults),
  spec: specToColumn(b.spec),
  reason: b.reason === null ? null : JSON.stringify(b.reason),
  requested_tags: JSON.stringify(b.requestedTags),
  created_at: b.createdAt,
  updated_at: b.updatedAt,
  finished_at: b.finishedAt,
});

const upsertSql = (table: string, columns: string[], key: string): string =>
  `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})
   ON CONFLICT (${key}) DO UPDATE SET ${columns.filter((c) => c !== key).map((c) => `${c} = excluded.${c}`).join(', ')}`;

const TEMPLATE_COLUMNS = Object.keys(templateToRow({} as TemplateRecord));
const BUILD_COLUMNS = Object.keys(buildToRow({ defaults: {}, spec: null, reason: null, requestedTags: [] } as unknown as BuildRecord));
const SAVE_TEMPLATE = upsertSql('templates', TEMPLATE_COLUMNS, 'template_id');
const SAVE_BUILD = upsertSql('template_builds', BUILD_COLUMNS, 'build_id');
const valuesOf = (row: object, columns: string[]): SqlValue[] => columns.map((c) => (row as Record<string, SqlValue>)[c] ?? null);

/** Persistence of templates, their builds, tags, build logs, build images and uploaded context files. */
export class TemplateStore {
  /** Appends in flight per build: a log line's number is the next free one, so they are written one at a time. */
  private readonly appending = new Map<string, Promise<void>>();

  constructor(private readonly sql: Sql) {}

  /** Runs `work` in one transaction (all or nothing) with a store bound to it: use only that store inside. */
  atomically<T>(work: (store: TemplateStore) => Promise<T>): Promise<T> {
    return this.sql.transaction((sql) => work(new TemplateStore(sql)));
  }

  // Templates

  async saveTemplate(template: TemplateRecord): Promise<void> {
    await this.sql.run(SAVE_TEMPLATE, valuesOf(templateToRow(template), TEMPLATE_COLUMNS));
  }

  async template(templateId: string): Promise<TemplateRecord | undefined> {
    const row = await this.sql.get<TemplateRow>('SELECT * FROM templates WHERE template_id = ?', [templateId]);
    return row ? templateFromRow(row) : undefined;
  }

  async templateByAlias(alias: string): Promise<TemplateRecord | undefined> {
    const row = await this.sql.get<TemplateRow>('SELECT * FROM templates WHERE alias = ?', [alias]);
    return row ? templateFromRow(row) : undefined;
  }

  async templates(kind?: TemplateRecord['kind']): Promise<TemplateRecord[]> {
    const rows =
      kind === undefined
        ? await this.sql.all<TemplateRow>('SELECT * FROM templates ORDER BY created_at, template_id')
        : await this.sql.all<TemplateRow>('SELECT * FROM templates WHERE kind = ? ORDER BY created_at, template_id', [kind]);
    return rows.map(templateFromRow);
  }

  async recordSpawn(templateId: string): Promise<void> {
    await this.sql.run('UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE template_id = ?', [new Date().toISOString(), templateId]);
  }

  /** Forgets a template with its builds, tags, logs and file references (its images are the caller's). */
  deleteTemplate(templateId: string): Promise<void> {
    return this.atomically(async (store) => {
      const builds = await store.sql.all<{ build_id: string }>('SELECT build_id FROM template_builds WHERE template_id = ?', [templateId]);
      for (const { build_id } of builds) await store.deleteBuild(build_id);
      await store.sql.run('DELETE FROM template_tags WHERE template_id = ?', [templateId]);
      await store.sql.run('DELETE FROM context_files WHERE template_id = ?', [templateId]);
      await store.sql.run('DELETE FROM templates WHERE template_id = ?', [templateId]);
    });
  }

  // Builds

  async saveBuild(build: BuildRecord): Promise<void> {
    await this.sql.run(SAVE_BUILD, valuesOf(buildToRow(build), BUILD_COLUMNS));
  }

  /**
   * Waiting → building (with its spec); with `team`, only while the team has fewer than `team.max` builds `building`: the count and the
   * claim are one statement (atomic on SQLite; on PostgreSQL the caller holds the team's build lock around it). False:
   * the build was not waiting any more, or the team had no room.
   */
  async claimWaitingBuild(building: BuildRecord, team?: { id: string; max: number }): Promise<boolean> {
    const withinQuota = team
      ? " AND (SELECT COUNT(*) FROM template_builds b JOIN templates t ON t.template_id = b.template_id WHERE t.team_id = ? AND b.status = 'building') < ?"
      : '';
    const changed = await this.sql.run(`UPDATE template_builds SET status = 'building', spec = ?, updated_at = ? WHERE build_id = ? AND status = 'waiting'${withinQuota}`, [
      specToColumn(building.spec),
      building.updatedAt,
      building.buildId,
      ...(team ? [team.id, team.max] : []),
    ]);
    return changed === 1;
  }

  /** Builds of the team's templates `building` now (running, or waiting for a build slot). */
  async teamBuilding(teamId: string): Promise<number> {
    const row = await this.sql.get<{ building: number | string }>(
      "SELECT COUNT(*) AS building FROM template_builds b JOIN templates t ON t.template_id = b.template_id WHERE t.team_id = ? AND b.status = 'building'",
      [teamId],
    );
    return Number(row?.building ?? 0);
  }

  /** Rewrites rows stored with registry credentials in their spec (by earlier versions) without them; answers how many. */
  async dropStoredRegistryCredentials(): Promise<number> {
    const rows = await this.sql.all<BuildRow>('SELECT * FROM template_builds WHERE spec LIKE ?', [SPEC_WITH_CREDENTIALS]);
    for (const row of rows) await this.sql.run('UPDATE template_builds SET spec = ? WHERE build_id = ?', [specToColumn(buildFromRow(row).spec), row.build_id]);
    return rows.length;
  }

  async build(buildId: string): Promise<BuildRecord | undefined> {
    const row = await this.sql.get<BuildRow>('SELECT * FROM template_builds WHERE build_id = ?', [buildId]);
    return row ? buildFromRow(row) : undefined;
  }

  /** Builds of a template, newest first. */
  async builds(templateId: string): Promise<BuildRecord[]> {
    const rows = await this.sql.all<BuildRow>('SELECT * FROM template_builds WHERE template_id = ? ORDER BY created_at DESC, rowid DESC', [templateId]);
    return rows.map(buildFromRow);
  }

  async buildsInStatus(...statuses: BuildStatus[]): Promise<BuildRecord[]> {
    const rows = await this.sql.all<BuildRow>(`SELECT * FROM template_builds WHERE status IN (${statuses.map(() => '?').join(', ')}) ORDER BY created_at, rowid`, statuses);
    return rows.map(buildFromRow);
  }

  deleteBuild(buildId: string): Promise<void> {
    return this.atomically(async (store) => {
      await store.sql.run('DELETE FROM build_logs WHERE build_id = ?', [buildId]);
      await store.sql.run('DELETE FROM build_images WHERE build_id = ?', [buildId]);
      await store.sql.run('DELETE FROM template_tags WHERE build_id = ?', [buildId]);
      await store.sql.run('DELETE FROM template_builds WHERE build_id = ?', [buildId]);
    });
  }

  // Tags

  async setTag(templateId: string, tag: string, buildId: string): Promise<void> {
    await this.sql.run(
      `INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at`,
      [templateId, tag, buildId, new Date().toISOString()],
    );
  }

  async removeTag(templateId: string, tag: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM template_tags WHERE template_id = ? AND tag = ?', [templateId, tag])) > 0;
  }

  async taggedBuild(templateId: string, tag: string): Promise<string | undefined> {
    const row = await this.sql.get<{ build_id: string }>('SELECT build_id FROM template_tags WHERE template_id = ? AND tag = ?', [templateId, tag]);
    return row?.build_id;
  }

  async tags(templateId: string): Promise<Array<{ tag: string; buildId: string; createdAt: string }>> {
    const rows = await this.sql.all<{ tag: string; build_id: string; created_at: string }>(
      'SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY created_at, tag',
      [templateId],
    );
    return rows.map((r) => ({ tag: r.tag, buildId: r.build_id, createdAt: r.created_at }));
  }

  async tagsOfBuild(buildId: string): Promise<string[]> {
    return (await this.sql.all<{ tag: string }>('SELECT tag FROM template_tags WHERE build_id = ? ORDER BY tag', [buildId])).map((r) => r.tag);
  }

  // Build logs

  /** Appends a line numbered after the build's last one; appends to one build are written in call order. */
  appendLog(buildId: string, level: LogLevel, message: string, step?: string): Promise<void> {
    const previous = this.appending.get(buildId) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(async () => {
        await this.sql.run(
          `INSERT INTO build_logs (build_id, seq, timestamp, level, message, step)
           VALUES (?, (SELECT COALESCE(MAX(seq), -1) + 1 FROM build_logs WHERE build_id = ?), ?, ?, ?, ?)`,
          [buildId, buildId, new Date().toISOString(), level, message, step ?? null],
        );
      });
    this.appending.set(buildId, next);
    void next.finally(() => {
      if (this.appending.get(buildId) === next) this.appending.delete(buildId);
    }).catch(() => undefined);
    return next;
  }

  /** Drops a build's log (a built-in template's build log starts again with each image build). */
  async clearLogs(buildId: string): Promise<void> {
    await (this.appending.get(buildId) ?? Promise.resolve()).catch(() => undefined);
    await this.sql.run('DELETE FROM build_logs WHERE build_id = ?', [buildId]);
  }

  /** Entries from index `offset` on (at most `limit`), optionally only at `minLevel` or above. */
  async logs(buildId: string, offset: number, limit: number): Promise<BuildLogEntry[]> {
    const rows = await this.sql.all<{ timestamp: string; level: LogLevel; message: string; step: string | null }>(
      'SELECT timestamp, level, message, step FROM build_logs WHERE build_id = ? AND seq >= ? ORDER BY seq LIMIT ?',
      [buildId, offset, limit],
    );
    return rows.map((r) => ({ timestamp: r.timestamp, level: r.level, message: r.message, ...(r.step === null ? {} : { step: r.step }) }));
  }

  // Images a build uses (final image, cache layers): removed when no build uses them any more.

  addBuildImages(buildId: string, images: string[]): Promise<void> {
    return this.atomically(async (store) => {
      for (const image of images) await store.sql.run('INSERT INTO build_images (build_id, image) VALUES (?, ?) ON CONFLICT (build_id, image) DO NOTHING', [buildId, image]);
    });
  }

  async buildImages(buildId: string): Promise<string[]> {
    return (await this.sql.all<{ image: string }>('SELECT image FROM build_images WHERE build_id = ? ORDER BY rowid', [buildId])).map((r) => r.image);
  }

  /** Every image some build still records (its own, or a layer it uses). */
  async imagesInUse(): Promise<Set<string>> {
    const rows = await this.sql.all<{ image: string }>('SELECT image FROM build_images UNION SELECT image FROM template_builds WHERE image IS NOT NULL');
    return new Set(rows.map((r) => r.image));
  }

  // Uploaded context archives (by files hash), referenced per template.

  async addContextFile(filesHash: string, templateId: string, size: number): Promise<void> {
    await this.sql.run(
      `INSERT INTO context_files (files_hash, template_id, size, uploaded_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (files_hash, template_id) DO UPDATE SET size = excluded.size, uploaded_at = excluded.uploaded_at`,
      [filesHash, templateId, size, new Date().toISOString()],
    );
  }

  /** Forgets `teamId`'s uses of an archive (archives are stored per team). */
  async forgetContextFile(filesHash: string, teamId: string): Promise<void> {
    await this.sql.run('DELETE FROM context_files WHERE files_hash = ? AND template_id IN (SELECT template_id FROM templates WHERE team_id = ?)', [filesHash, teamId]);
  }

  async contextFilesOf(templateId: string): Promise<string[]> {
    return (await this.sql.all<{ files_hash: string }>('SELECT files_hash FROM context_files WHERE template_id = ?', [templateId])).map((r) => r.files_hash);
  }

  /** Whether a template of `teamId` still uses its archive of `filesHash`. */
  async contextFileInUse(filesHash: string, teamId: string): Promise<boolean> {
    const row = await this.sql.get(
      'SELECT 1 AS one FROM context_files c JOIN templates t ON t.template_id = c.template_id WHERE c.files_hash = ? AND t.team_id = ? LIMIT 1',
      [filesHash, teamId],
    );
    return row !== undefined;
  }
}

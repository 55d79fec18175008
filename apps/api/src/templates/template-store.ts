import type { Db } from '../store/database.ts';
import type { BuildLogEntry, BuildRecord, BuildStatus, LogLevel, TemplateRecord } from './template-model.ts';

interface TemplateRow {
  template_id: string;
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
  spec: b.spec === null ? null : JSON.stringify(b.spec),
  reason: b.reason === null ? null : JSON.stringify(b.reason),
  requested_tags: JSON.stringify(b.requestedTags),
  created_at: b.createdAt,
  updated_at: b.updatedAt,
  finished_at: b.finishedAt,
});

const upsertSql = (table: string, columns: string[], key: string): string =>
  `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})
   ON CONFLICT (${key}) DO UPDATE SET ${columns.filter((c) => c !== key).map((c) => `${c} = excluded.${c}`).join(', ')}`;

/** Persistence of templates, their builds, tags, build logs, build images and uploaded context files. */
export class TemplateStore {
  private readonly saveTemplateStatement;
  private readonly saveBuildStatement;
  private readonly appendLogStatement;

  constructor(private readonly db: Db) {
    const templateColumns = Object.keys(templateToRow({} as TemplateRecord));
    const buildColumns = Object.keys(buildToRow({ defaults: {}, spec: null, reason: null, requestedTags: [] } as unknown as BuildRecord));
    this.saveTemplateStatement = db.prepare(upsertSql('templates', templateColumns, 'template_id'));
    this.saveBuildStatement = db.prepare(upsertSql('template_builds', buildColumns, 'build_id'));
    this.appendLogStatement = db.prepare(
      `INSERT INTO build_logs (build_id, seq, timestamp, level, message, step)
       VALUES (@buildId, (SELECT COALESCE(MAX(seq), -1) + 1 FROM build_logs WHERE build_id = @buildId), @timestamp, @level, @message, @step)`,
    );
  }

  /** Runs `work` in one transaction (all or nothing). */
  atomically<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  // Templates

  saveTemplate(template: TemplateRecord): void {
    this.saveTemplateStatement.run(templateToRow(template));
  }

  template(templateId: string): TemplateRecord | undefined {
    const row = this.db.prepare('SELECT * FROM templates WHERE template_id = ?').get(templateId) as TemplateRow | undefined;
    return row ? templateFromRow(row) : undefined;
  }

  templateByAlias(alias: string): TemplateRecord | undefined {
    const row = this.db.prepare('SELECT * FROM templates WHERE alias = ?').get(alias) as TemplateRow | undefined;
    return row ? templateFromRow(row) : undefined;
  }

  templates(kind?: TemplateRecord['kind']): TemplateRecord[] {
    const rows = (kind === undefined
      ? this.db.prepare('SELECT * FROM templates ORDER BY created_at, template_id').all()
      : this.db.prepare('SELECT * FROM templates WHERE kind = ? ORDER BY created_at, template_id').all(kind)) as TemplateRow[];
    return rows.map(templateFromRow);
  }

  recordSpawn(templateId: string): void {
    this.db.prepare('UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE template_id = ?').run(new Date().toISOString(), templateId);
  }

  /** Forgets a template with its builds, tags, logs and file references (its images are the caller's). */
  deleteTemplate(templateId: string): void {
    this.atomically(() => {
      const builds = this.db.prepare('SELECT build_id FROM template_builds WHERE template_id = ?').all(templateId) as { build_id: string }[];
      for (const { build_id } of builds) this.deleteBuild(build_id);
      this.db.prepare('DELETE FROM template_tags WHERE template_id = ?').run(templateId);
      this.db.prepare('DELETE FROM context_files WHERE template_id = ?').run(templateId);
      this.db.prepare('DELETE FROM templates WHERE template_id = ?').run(templateId);
    });
  }

  // Builds

  saveBuild(build: BuildRecord): void {
    this.saveBuildStatement.run(buildToRow(build));
  }

  build(buildId: string): BuildRecord | undefined {
    const row = this.db.prepare('SELECT * FROM template_builds WHERE build_id = ?').get(buildId) as BuildRow | undefined;
    return row ? buildFromRow(row) : undefined;
  }

  /** Builds of a template, newest first. */
  builds(templateId: string): BuildRecord[] {
    const rows = this.db.prepare('SELECT * FROM template_builds WHERE template_id = ? ORDER BY created_at DESC, rowid DESC').all(templateId) as BuildRow[];
    return rows.map(buildFromRow);
  }

  buildsInStatus(...statuses: BuildStatus[]): BuildRecord[] {
    const rows = this.db
      .prepare(`SELECT * FROM template_builds WHERE status IN (${statuses.map(() => '?').join(', ')}) ORDER BY created_at, rowid`)
      .all(...statuses) as BuildRow[];
    return rows.map(buildFromRow);
  }

  deleteBuild(buildId: string): void {
    this.atomically(() => {
      this.db.prepare('DELETE FROM build_logs WHERE build_id = ?').run(buildId);
      this.db.prepare('DELETE FROM build_images WHERE build_id = ?').run(buildId);
      this.db.prepare('DELETE FROM template_tags WHERE build_id = ?').run(buildId);
      this.db.prepare('DELETE FROM template_builds WHERE build_id = ?').run(buildId);
    });
  }

  // Tags

  setTag(templateId: string, tag: string, buildId: string): void {
    this.db
      .prepare(
        `INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at`,
      )
      .run(templateId, tag, buildId, new Date().toISOString());
  }

  removeTag(templateId: string, tag: string): boolean {
    return this.db.prepare('DELETE FROM template_tags WHERE template_id = ? AND tag = ?').run(templateId, tag).changes > 0;
  }

  taggedBuild(templateId: string, tag: string): string | undefined {
    const row = this.db.prepare('SELECT build_id FROM template_tags WHERE template_id = ? AND tag = ?').get(templateId, tag) as { build_id: string } | undefined;
    return row?.build_id;
  }

  tags(templateId: string): Array<{ tag: string; buildId: string; createdAt: string }> {
    const rows = this.db.prepare('SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY created_at, tag').all(templateId) as Array<{
      tag: string;
      build_id: string;
      created_at: string;
    }>;
    return rows.map((r) => ({ tag: r.tag, buildId: r.build_id, createdAt: r.created_at }));
  }

  tagsOfBuild(buildId: string): string[] {
    return (this.db.prepare('SELECT tag FROM template_tags WHERE build_id = ? ORDER BY tag').all(buildId) as { tag: string }[]).map((r) => r.tag);
  }

  // Build logs

  appendLog(buildId: string, level: LogLevel, message: string, step?: string): void {
    this.appendLogStatement.run({ buildId, timestamp: new Date().toISOString(), level, message, step: step ?? null });
  }

  /** Entries from index `offset` on (at most `limit`), optionally only at `minLevel` or above. */
  logs(buildId: string, offset: number, limit: number): BuildLogEntry[] {
    const rows = this.db
      .prepare('SELECT timestamp, level, message, step FROM build_logs WHERE build_id = ? AND seq >= ? ORDER BY seq LIMIT ?')
      .all(buildId, offset, limit) as Array<{ timestamp: string; level: LogLevel; message: string; step: string | null }>;
    return rows.map((r) => ({ timestamp: r.timestamp, level: r.level, message: r.message, ...(r.step === null ? {} : { step: r.step }) }));
  }

  // Images a build uses (final image, cache layers): removed when no build uses them any more.

  addBuildImages(buildId: string, images: string[]): void {
    const statement = this.db.prepare('INSERT OR IGNORE INTO build_images (build_id, image) VALUES (?, ?)');
    this.atomically(() => {
      for (const image of images) statement.run(buildId, image);
    });
  }

  buildImages(buildId: string): string[] {
    return (this.db.prepare('SELECT image FROM build_images WHERE build_id = ? ORDER BY rowid').all(buildId) as { image: string }[]).map((r) => r.image);
  }

  /** Every image some build still records (its own, or a layer it uses). */
  imagesInUse(): Set<string> {
    const rows = this.db.prepare('SELECT image FROM build_images UNION SELECT image FROM template_builds WHERE image IS NOT NULL').all() as { image: string }[];
    return new Set(rows.map((r) => r.image));
  }

  // Uploaded context archives (by files hash), referenced per template.

  addContextFile(filesHash: string, templateId: string, size: number): void {
    this.db.prepare('INSERT OR REPLACE INTO context_files (files_hash, template_id, size, uploaded_at) VALUES (?, ?, ?, ?)').run(filesHash, templateId, size, new Date().toISOString());
  }

  forgetContextFile(filesHash: string): void {
    this.db.prepare('DELETE FROM context_files WHERE files_hash = ?').run(filesHash);
  }

  contextFilesOf(templateId: string): string[] {
    return (this.db.prepare('SELECT files_hash FROM context_files WHERE template_id = ?').all(templateId) as { files_hash: string }[]).map((r) => r.files_hash);
  }

  contextFileInUse(filesHash: string): boolean {
    return this.db.prepare('SELECT 1 FROM context_files WHERE files_hash = ? LIMIT 1').get(filesHash) !== undefined;
  }
}

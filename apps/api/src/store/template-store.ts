import type { Db } from './database.ts';

export interface TemplateRecord {
  templateId: string;
  alias: string | null;
  image: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  buildId: string;
  public: boolean;
  createdAt: string;
  updatedAt: string;
  spawnCount: number;
  lastSpawnedAt: string | null;
  buildCount: number;
}

interface Row {
  template_id: string;
  alias: string | null;
  image: string;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  envd_version: string;
  build_id: string;
  public: number;
  created_at: string;
  updated_at: string;
  spawn_count: number;
  last_spawned_at: string | null;
  build_count: number;
}

const fromRow = (row: Row): TemplateRecord => ({
  templateId: row.template_id,
  alias: row.alias,
  image: row.image,
  cpuCount: row.cpu_count,
  memoryMB: row.memory_mb,
  diskSizeMB: row.disk_size_mb,
  envdVersion: row.envd_version,
  buildId: row.build_id,
  public: row.public === 1,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  spawnCount: row.spawn_count,
  lastSpawnedAt: row.last_spawned_at,
  buildCount: row.build_count,
});

/** Templates: the images sandboxes are created from, found by id or alias. */
export class TemplateStore {
  constructor(private readonly db: Db) {}

  /** Finds a template by id or alias; a `:tag` suffix other than `default` finds nothing yet. */
  find(reference: string): TemplateRecord | undefined {
    const [name, tag] = reference.split(':', 2);
    if (tag !== undefined && tag !== 'default') return undefined;
    const row = this.db.prepare('SELECT * FROM templates WHERE template_id = ? OR alias = ?').get(name, name) as Row | undefined;
    return row ? fromRow(row) : undefined;
  }

  upsert(template: TemplateRecord): void {
    this.db
      .prepare(
        `INSERT INTO templates (template_id, alias, image, cpu_count, memory_mb, disk_size_mb, envd_version, build_id, public, created_at, updated_at, spawn_count, last_spawned_at, build_count)
         VALUES (@templateId, @alias, @image, @cpuCount, @memoryMB, @diskSizeMB, @envdVersion, @buildId, @public, @createdAt, @updatedAt, @spawnCount, @lastSpawnedAt, @buildCount)
         ON CONFLICT (template_id) DO UPDATE SET image = excluded.image, envd_version = excluded.envd_version, updated_at = excluded.updated_at`,
      )
      .run({ ...template, public: template.public ? 1 : 0 });
  }

  /** The version a real envd reported: kept so the template shows what its sandboxes run. */
  setEnvdVersion(templateId: string, envdVersion: string): void {
    this.db.prepare('UPDATE templates SET envd_version = ? WHERE template_id = ? AND envd_version <> ?').run(envdVersion, templateId, envdVersion);
  }

  recordSpawn(templateId: string): void {
    this.db.prepare('UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE template_id = ?').run(new Date().toISOString(), templateId);
  }
}

import type { SandboxRecord } from './sandbox-record.ts';
import type { Sql } from '../../store/sql.ts';

interface Row {
  sandbox_id: string;
  team_id: string;
  template_id: string;
  build_id: string;
  alias: string | null;
  defaults: string;
  state: 'running' | 'paused';
  container_id: string | null;
  address: string | null;
  paused_image: string | null;
  started_at: string;
  end_at: string;
  timeout_seconds: number;
  paused_at: string | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  envd_version: string;
  envd_access_token: string;
  traffic_access_token: string | null;
  metadata: string;
  env_vars: string;
  network: string;
  allow_internet_access: number | null;
  auto_pause: number;
  auto_pause_memory: number;
  auto_resume: number;
  volume_mounts: string;
  node_id: string | null;
}

function fromRow(row: Row): SandboxRecord {
  return {
    sandboxId: row.sandbox_id,
    teamId: row.team_id,
    templateId: row.template_id,
    buildId: row.build_id,
    alias: row.alias,
    defaults: JSON.parse(row.defaults) as SandboxRecord['defaults'],
    state: row.state,
    containerId: row.container_id,
    address: row.address,
    pausedImage: row.paused_image,
    startedAt: row.started_at,
    endAt: row.end_at,
    timeoutSeconds: row.timeout_seconds,
    pausedAt: row.paused_at,
    cpuCount: row.cpu_count,
    memoryMB: row.memory_mb,
    diskSizeMB: row.disk_size_mb,
    envdVersion: row.envd_version,
    envdAccessToken: row.envd_access_token,
    trafficAccessToken: row.traffic_access_token,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    envVars: JSON.parse(row.env_vars) as Record<string, string>,
    network: JSON.parse(row.network) as SandboxRecord['network'],
    allowInternetAccess: row.allow_internet_access === null ? null : row.allow_internet_access === 1,
    autoPause: row.auto_pause === 1,
    autoPauseMemory: row.auto_pause_memory === 1,
    autoResume: row.auto_resume === 1,
    volumeMounts: JSON.parse(row.volume_mounts) as SandboxRecord['volumeMounts'],
    nodeId: row.node_id ?? '',
  };
}

function toRow(record: SandboxRecord): Row {
  return {
    sandbox_id: record.sandboxId,
    team_id: record.teamId,
    template_id: record.templateId,
    build_id: record.buildId,
    alias: record.alias,
    defaults: JSON.stringify(record.defaults),
    state: record.state,
    container_id: record.containerId,
    address: record.address,
    paused_image: record.pausedImage,
    started_at: record.startedAt,
    end_at: record.endAt,
    timeout_seconds: record.timeoutSeconds,
    paused_at: record.pausedAt,
    cpu_count: record.cpuCount,
    memory_mb: record.memoryMB,
    disk_size_mb: record.diskSizeMB,
    envd_version: record.envdVersion,
    envd_access_token: record.envdAccessToken,
    traffic_access_token: record.trafficAccessToken,
    metadata: JSON.stringify(record.metadata),
    env_vars: JSON.stringify(record.envVars),
    network: JSON.stringify(record.network),
    allow_internet_access: record.allowInternetAccess === null ? null : record.allowInternetAccess ? 1 : 0,
    auto_pause: record.autoPause ? 1 : 0,
    auto_pause_memory: record.autoPauseMemory ? 1 : 0,
    auto_resume: record.autoResume ? 1 : 0,
    volume_mounts: JSON.stringify(record.volumeMounts),
    node_id: record.nodeId,
  };
}

const COLUMNS = Object.keys(toRow({} as SandboxRecord & { metadata: object; envVars: object; network: object; volumeMounts: object }));

const UPSERT = `INSERT INTO sandboxes (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})
  ON CONFLICT (sandbox_id) DO UPDATE SET ${COLUMNS.filter((c) => c !== 'sandbox_id').map((c) => `${c} = excluded.${c}`).join(', ')}`;

/** Persistence of sandbox records and their lifecycle events. */
export class SandboxStore {
  constructor(private readonly sql: Sql) {}

  /** The same store over `sql` (a transaction's). */
  within(sql: Sql): SandboxStore {
    return new SandboxStore(sql);
  }

  async save(record: SandboxRecord): Promise<void> {
    const row = toRow(record) as unknown as Record<string, string | number | null>;
    await this.sql.run(UPSERT, COLUMNS.map((c) => row[c] ?? null));
  }

  /** Rows made before sandboxes had nodes belong to the embedded node `nodeId`; resolves with how many were given it. */
  assignUnplaced(nodeId: string): Promise<number> {
    return this.sql.run('UPDATE sandboxes SET node_id = ? WHERE node_id IS NULL', [nodeId]);
  }

  /** Forgets a sandbox and its log lines (a killed sandbox answers 404 everywhere, its logs included). */
  async delete(sandboxId: string): Promise<void> {
    await this.sql.transaction(async (sql) => {
      await sql.run('DELETE FROM sandboxes WHERE sandbox_id = ?', [sandboxId]);
      await sql.run('DELETE FROM sandbox_events WHERE sandbox_id = ?', [sandboxId]);
    });
  }

  async get(sandboxId: string): Promise<SandboxRecord | undefined> {
    const row = await this.sql.get<Row>('SELECT * FROM sandboxes WHERE sandbox_id = ?', [sandboxId]);
    return row && fromRow(row);
  }

  /** The stored records of `ids` (missing ones left out), at most 500 ids per call. */
  async getMany(ids: readonly string[]): Promise<SandboxRecord[]> {
    if (ids.length === 0) return [];
    if (ids.length > 500) throw new Error('store: at most 500 sandbox ids at once');
    return (await this.sql.all<Row>(`SELECT * FROM sandboxes WHERE sandbox_id IN (${ids.map(() => '?').join(', ')})`, ids)).map(fromRow);
  }

  async all(): Promise<SandboxRecord[]> {
    return (await this.sql.all<Row>('SELECT * FROM sandboxes ORDER BY started_at, sandbox_id')).map(fromRow);
  }

  /** Sandboxes recorded on each node (running or paused), by node id; those placed on no node are left out. */
  async countByNode(): Promise<Map<string, number>> {
    const rows = await this.sql.all<{ node_id: string | null; n: number | string }>('SELECT node_id, COUNT(*) AS n FROM sandboxes WHERE node_id IS NOT NULL GROUP BY node_id');
    return new Map(rows.map((row) => [row.node_id!, Number(row.n)]));
  }

  /**
   * Takes the right to act on a running sandbox's expired timeout for `leaseMs`: exactly one caller (of all
   * replicas on the database) gets true while the lease runs; the holder may take it again (a retry).
   */
  async claimTimeout(sandboxId: string, owner: string, now: Date, leaseMs: number): Promise<boolean> {
    const nowMs = now.getTime();
    const changed = await this.sql.run(
      `UPDATE sandboxes SET lease_owner = ?, lease_until = ?
       WHERE sandbox_id = ? AND state = 'running' AND end_at <= ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_until < ?)`,
      [owner, nowMs + leaseMs, sandboxId, now.toISOString(), owner, nowMs],
    );
    return changed === 1;
  }

  /** Gives a timeout lease back (after the action: the sandbox is paused, or gone with its row). */
  async releaseTimeout(sandboxId: string, owner: string): Promise<void> {
    await this.sql.run('UPDATE sandboxes SET lease_owner = NULL, lease_until = NULL WHERE sandbox_id = ? AND lease_owner = ?', [sandboxId, owner]);
  }

  async recordEvent(sandboxId: string, level: 'debug' | 'info' | 'warn' | 'error', message: string): Promise<void> {
    await this.sql.run('INSERT INTO sandbox_events (sandbox_id, timestamp, level, message) VALUES (?, ?, ?, ?)', [sandboxId, new Date().toISOString(), level, message]);
  }

  events(sandboxId: string): Promise<Array<{ timestamp: string; level: string; message: string }>> {
    return this.sql.all('SELECT timestamp, level, message FROM sandbox_events WHERE sandbox_id = ? ORDER BY id', [sandboxId]);
  }
}

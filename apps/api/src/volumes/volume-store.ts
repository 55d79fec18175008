import type { Sql } from '../store/sql.ts';
import type { Volume } from './volume-model.ts';

interface VolumeRow {
  volume_id: string;
  team_id: string;
  name: string;
  token: string;
  created_at: string;
  node_id: string | null;
}

const toVolume = (row: VolumeRow): Volume => ({ volumeID: row.volume_id, teamId: row.team_id, name: row.name, token: row.token, createdAt: row.created_at, nodeId: row.node_id ?? '' });

/** The `volumes` table: one row per volume; the name is unique within its team. */
export class VolumeStore {
  constructor(private readonly sql: Sql) {}

  async get(volumeID: string): Promise<Volume | undefined> {
    const row = await this.sql.get<VolumeRow>('SELECT * FROM volumes WHERE volume_id = ?', [volumeID]);
    return row && toVolume(row);
  }

  async byName(teamId: string, name: string): Promise<Volume | undefined> {
    const row = await this.sql.get<VolumeRow>('SELECT * FROM volumes WHERE team_id = ? AND name = ?', [teamId, name]);
    return row && toVolume(row);
  }

  /** Every team's volumes (start-up sweep, content directories). */
  async list(): Promise<Volume[]> {
    return (await this.sql.all<VolumeRow>('SELECT * FROM volumes ORDER BY created_at, volume_id')).map(toVolume);
  }

  async listOf(teamId: string): Promise<Volume[]> {
    return (await this.sql.all<VolumeRow>('SELECT * FROM volumes WHERE team_id = ? ORDER BY created_at, volume_id', [teamId])).map(toVolume);
  }

  /** False when the name is taken in the team. */
  async insert(volume: Volume): Promise<boolean> {
    const changed = await this.sql.run('INSERT INTO volumes (volume_id, team_id, name, token, created_at, node_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (team_id, name) DO NOTHING', [
      volume.volumeID,
      volume.teamId,
      volume.name,
      volume.token,
      volume.createdAt,
      volume.nodeId,
    ]);
    return changed === 1;
  }

  /** Volumes made before they recorded a node belong to the embedded node (their directories are on its disk). */
  assignUnplaced(nodeId: string): Promise<number> {
    return this.sql.run('UPDATE volumes SET node_id = ? WHERE node_id IS NULL', [nodeId]);
  }

  /** How many volumes each node holds. */
  async countsByNode(): Promise<Map<string, number>> {
    const rows = await this.sql.all<{ node_id: string | null; n: number | string }>('SELECT node_id, COUNT(*) AS n FROM volumes GROUP BY node_id');
    return new Map(rows.map((r) => [r.node_id ?? '', Number(r.n)]));
  }

  async delete(volumeID: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM volumes WHERE volume_id = ?', [volumeID])) === 1;
  }
}

import type { Db } from '../store/database.ts';
import type { Volume } from './volume-model.ts';

interface VolumeRow {
  volume_id: string;
  name: string;
  token: string;
  created_at: string;
}

const toVolume = (row: VolumeRow): Volume => ({ volumeID: row.volume_id, name: row.name, token: row.token, createdAt: row.created_at });

/** The `volumes` table: one row per volume; the name is unique. */
export class VolumeStore {
  constructor(private readonly db: Db) {}

  get(volumeID: string): Volume | undefined {
    const row = this.db.prepare('SELECT * FROM volumes WHERE volume_id = ?').get(volumeID) as VolumeRow | undefined;
    return row && toVolume(row);
  }

  byName(name: string): Volume | undefined {
    const row = this.db.prepare('SELECT * FROM volumes WHERE name = ?').get(name) as VolumeRow | undefined;
    return row && toVolume(row);
  }

  list(): Volume[] {
    return (this.db.prepare('SELECT * FROM volumes ORDER BY created_at, volume_id').all() as VolumeRow[]).map(toVolume);
  }

  /** False when the name is taken. */
  insert(volume: Volume): boolean {
    const result = this.db
      .prepare('INSERT INTO volumes (volume_id, name, token, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING')
      .run(volume.volumeID, volume.name, volume.token, volume.createdAt);
    return result.changes === 1;
  }

  delete(volumeID: string): boolean {
    return this.db.prepare('DELETE FROM volumes WHERE volume_id = ?').run(volumeID).changes === 1;
  }
}

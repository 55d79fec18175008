import { promises as fs } from 'node:fs';

/** statfs magic numbers of network and user-space filesystems, where inotify misses remote changes. */
const NETWORK_FILESYSTEMS = new Map<number, string>([
  [0x6969, 'nfs'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x517b, 'smb'],
  [0x65735546, 'fuse'],
]);

/** The network filesystem `path` lives on, or undefined for local ones (or when statfs fails). */
export async function networkFilesystemOf(path: string): Promise<string | undefined> {
  try {
    const { type } = await fs.statfs(path);
    // f_type is a signed long on some ABIs; normalise to the unsigned 32-bit magic.
    return NETWORK_FILESYSTEMS.get(type >>> 0);
  } catch {
    return undefined;
  }
}

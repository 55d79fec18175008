type Xattr = typeof import('fs-xattr');

let loadedXattr: Promise<Xattr> | undefined;

/** fs-xattr, loaded on first use (its addon is RSS an idle envd does not need). */
function xattr(): Promise<Xattr> {
  loadedXattr ??= import('fs-xattr');
  return loadedXattr;
}

const PREFIX = 'user.e2b.';

function unsupported(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return ['ENOTSUP', 'EOPNOTSUPP', 'ENODATA', 'ENOENT', 'EPERM', 'EACCES', 'ELOOP', 'ENOTDIR'].includes(code ?? '');
}

/** The file's `user.e2b.*` extended attributes, keys without the prefix; empty where xattrs are unsupported. */
export async function readMetadata(path: string): Promise<Record<string, string>> {
  const { getAttribute, listAttributes } = await xattr();
  let names: string[];
  try {
    names = await listAttributes(path);
  } catch (error) {
    if (unsupported(error)) return {};
    throw error;
  }
  const metadata: Record<string, string> = {};
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    try {
      metadata[name.slice(PREFIX.length)] = (await getAttribute(path, name)).toString('utf8');
    } catch (error) {
      if (!unsupported(error)) throw error;
    }
  }
  return metadata;
}

/** Replaces the whole `user.e2b.*` set of a file with the given one (keys lower-cased). */
export async function replaceMetadata(path: string, metadata: Record<string, string>): Promise<void> {
  const { listAttributes, removeAttribute, setAttribute } = await xattr();
  const existing = await listAttributes(path).catch((error: unknown) => {
    if (unsupported(error) && Object.keys(metadata).length === 0) return [] as string[];
    throw error;
  });
  for (const name of existing) {
    if (name.startsWith(PREFIX)) await removeAttribute(path, name);
  }
  for (const [key, value] of Object.entries(metadata)) {
    await setAttribute(path, PREFIX + key.toLowerCase(), value);
  }
}

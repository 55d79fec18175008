import { AccountFile } from './account-file.ts';
import type { RootFilesystem } from './root-filesystem.ts';

const PATHS = { passwd: '/etc/passwd', group: '/etc/group', shadow: '/etc/shadow', gshadow: '/etc/gshadow' } as const;
type Database = keyof typeof PATHS;

/** Modes of the files this creates (only passwd and group are ever created). */
const NEW_FILE_MODE = 0o644;

/**
 * The four account files of a root filesystem, loaded together and written back only where
 * something changed. shadow and gshadow are undefined when the image has none: they are never
 * created, since an image without them does not use them.
 */
export class AccountDatabases {
  private readonly original: Record<Database, string | undefined>;

  private constructor(
    private readonly fs: RootFilesystem,
    readonly passwd: AccountFile,
    readonly group: AccountFile,
    readonly shadow: AccountFile | undefined,
    readonly gshadow: AccountFile | undefined,
    original: Record<Database, string | undefined>,
  ) {
    this.original = original;
  }

  static load(fs: RootFilesystem): AccountDatabases {
    const text = {
      passwd: fs.readText(PATHS.passwd),
      group: fs.readText(PATHS.group),
      shadow: fs.readText(PATHS.shadow),
      gshadow: fs.readText(PATHS.gshadow),
    };
    return new AccountDatabases(
      fs,
      new AccountFile(text.passwd),
      new AccountFile(text.group),
      text.shadow === undefined ? undefined : new AccountFile(text.shadow),
      text.gshadow === undefined ? undefined : new AccountFile(text.gshadow),
      text,
    );
  }

  /** Password field for new passwd/group entries: `x` (see shadow) when there is a shadow file. */
  get passwordPlaceholder(): string {
    return this.shadow ? 'x' : '*';
  }

  /** Writes every file whose content changed; returns their paths. */
  save(): string[] {
    const written: string[] = [];
    for (const name of Object.keys(PATHS) as Database[]) {
      const file = this[name];
      if (!file) continue;
      const text = file.toString();
      if (text === (this.original[name] ?? '')) continue;
      if (!this.fs.stat('/etc')?.isDirectory()) this.fs.makeDirectory('/etc', 0o755);
      this.fs.writeText(PATHS[name], text, NEW_FILE_MODE);
      this.original[name] = text;
      written.push(PATHS[name]);
    }
    return written;
  }
}

/**
 * One of the colon-separated account databases (/etc/passwd, /etc/group, /etc/shadow,
 * /etc/gshadow), edited the way an administrator would: lines that are not touched, comments
 * and odd entries included, come back out byte for byte; new entries are appended.
 */
export class AccountFile {
  private readonly lines: string[];

  constructor(text = '') {
    this.lines = text.split('\n');
    if (this.lines[this.lines.length - 1] === '') this.lines.pop();
  }

  /** Fields of the entry named `name`, or undefined. */
  get(name: string): string[] | undefined {
    const index = this.indexOf(name);
    return index < 0 ? undefined : this.lines[index].split(':');
  }

  has(name: string): boolean {
    return this.indexOf(name) >= 0;
  }

  /** Name of the entry whose numeric field `field` (2 for uid/gid) is `id`, if any. */
  nameWithId(field: number, id: number): string | undefined {
    for (const fields of this.entries()) {
      if (fields[field] !== undefined && fields[field] !== '' && Number(fields[field]) === id) return fields[0];
    }
    return undefined;
  }

  /** `preferred` when no entry uses it in `field`, else the lowest free id from `preferred` on. */
  freeId(field: number, preferred: number): number {
    let id = preferred;
    while (this.nameWithId(field, id) !== undefined) id++;
    return id;
  }

  append(fields: string[]): void {
    this.lines.push(fields.join(':'));
  }

  /**
   * Adds `member` to the comma-separated list in `field` of entry `name`. Returns false when the
   * entry does not exist or already lists the member.
   */
  addToList(name: string, field: number, member: string): boolean {
    const index = this.indexOf(name);
    if (index < 0) return false;
    const fields = this.lines[index].split(':');
    while (fields.length <= field) fields.push('');
    const list = fields[field].split(',').map((m) => m.trim()).filter(Boolean);
    if (list.includes(member)) return false;
    fields[field] = [...list, member].join(',');
    this.lines[index] = fields.join(':');
    return true;
  }

  toString(): string {
    return this.lines.length === 0 ? '' : `${this.lines.join('\n')}\n`;
  }

  private *entries(): Generator<string[]> {
    for (const line of this.lines) {
      if (isEntry(line)) yield line.split(':');
    }
  }

  private indexOf(name: string): number {
    return this.lines.findIndex((line) => isEntry(line) && line.split(':', 1)[0] === name);
  }
}

function isEntry(line: string): boolean {
  return line.trim() !== '' && !line.startsWith('#');
}

import { describe, expect, it } from 'vitest';
import { AccountFile } from './account-file.ts';

const PASSWD = ['# a comment', 'root:x:0:0:root:/root:/bin/bash', '', 'ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash', '+@nis::::::'].join('\n');

describe('AccountFile', () => {
  it('finds entries by name and ignores comments and blank lines', () => {
    const file = new AccountFile(`${PASSWD}\n`);
    expect(file.get('root')).toEqual(['root', 'x', '0', '0', 'root', '/root', '/bin/bash']);
    expect(file.has('# a comment')).toBe(false);
    expect(file.has('nobody')).toBe(false);
  });

  it('knows which ids are taken and picks the next free one', () => {
    const file = new AccountFile(PASSWD);
    expect(file.nameWithId(2, 1000)).toBe('ubuntu');
    expect(file.freeId(2, 1000)).toBe(1001);
    expect(file.freeId(2, 500)).toBe(500);
  });

  it('keeps untouched lines byte for byte and appends with a final newline', () => {
    const file = new AccountFile(PASSWD);
    file.append(['user', 'x', '1001', '1001', '', '/home/user', '/bin/bash']);
    expect(file.toString()).toBe(`${PASSWD}\nuser:x:1001:1001::/home/user:/bin/bash\n`);
    expect(new AccountFile('').toString()).toBe('');
  });

  it('adds a member to a list field once', () => {
    const group = new AccountFile('sudo:x:27:\nadm:x:4:syslog\nshort:x:5\n');
    expect(group.addToList('sudo', 3, 'user')).toBe(true);
    expect(group.addToList('sudo', 3, 'user')).toBe(false);
    expect(group.addToList('adm', 3, 'user')).toBe(true);
    expect(group.addToList('short', 3, 'user')).toBe(true);
    expect(group.addToList('missing', 3, 'user')).toBe(false);
    expect(group.toString()).toBe('sudo:x:27:user\nadm:x:4:syslog,user\nshort:x:5:user\n');
  });
});

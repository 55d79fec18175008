import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isEnvdHelper, loopbackOnlyPorts, parseProcNetTcp, processesBesides } from './listening-sockets.ts';

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:C2B7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F41 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
   3: 0100007F:C2B7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
`;
const TCP6 = `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000
`;

describe('parseProcNetTcp', () => {
  it('reads listening IPv4 and IPv6 sockets only', () => {
    expect(parseProcNetTcp(TCP, false)).toEqual([
      { address: '127.0.0.1', port: 8000 },
      { address: '0.0.0.0', port: 49847 },
      { address: '127.0.0.1', port: 49847 },
    ]);
    expect(parseProcNetTcp(TCP6, true)).toEqual([
      { address: '::1', port: 8080 },
      { address: '::', port: 80 },
    ]);
  });

  it('keeps ports that listen on loopback only', () => {
    const sockets = [...parseProcNetTcp(TCP, false), ...parseProcNetTcp(TCP6, true)];
    expect(loopbackOnlyPorts(sockets)).toEqual([
      { port: 8000, host: '127.0.0.1' },
      { port: 8080, host: '::1' },
    ]);
    expect(loopbackOnlyPorts([{ address: '::1', port: 9000 }, { address: '127.0.0.1', port: 9000 }])).toEqual([{ port: 9000, host: '127.0.0.1' }]);
  });
});

describe('processesBesides', () => {
  it('tells whether a process other than the given ones is in a /proc directory', () => {
    const proc = mkdtempSync(join(tmpdir(), 'envd-proc-'));
    try {
      for (const name of ['1', '7', 'self', 'net', 'sys']) mkdirSync(join(proc, name));
      expect(processesBesides([1, 7], proc)).toBe(false);
      expect(processesBesides([7], proc)).toBe(true);
      // envd's spawn server does not count; anything else does.
      mkdirSync(join(proc, '9'));
      writeFileSync(join(proc, '9', 'cmdline'), '/opt/tidepool/bin/exec-as-user\0--serve\0');
      expect(processesBesides([1, 7], proc)).toBe(false);
      mkdirSync(join(proc, '42'));
      writeFileSync(join(proc, '42', 'cmdline'), 'python3\0-m\0http.server\0');
      expect(processesBesides([1, 7], proc)).toBe(true);
    } finally {
      rmSync(proc, { recursive: true, force: true });
    }
  });

  it("recognises only envd's helper server as envd's own", () => {
    expect(isEnvdHelper(['/opt/tidepool/bin/exec-as-user', '--serve'])).toBe(true);
    expect(isEnvdHelper(['/opt/tidepool/bin/exec-as-user', '--serve', 'x'])).toBe(false);
    expect(isEnvdHelper(['/opt/tidepool/bin/exec-as-user', '1000', 'bash'])).toBe(false);
    expect(isEnvdHelper(['python3', '--serve'])).toBe(false);
  });

  it('sees the processes of this machine in the real /proc, and counts an unreadable one as busy', () => {
    expect(processesBesides([process.pid])).toBe(true);
    expect(processesBesides([], '/nonexistent-proc')).toBe(true);
  });
});

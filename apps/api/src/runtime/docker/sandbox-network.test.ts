import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isolateSandboxNetwork } from './sandbox-network.ts';

/** Just enough of an engine for the isolation setup to find the network. */
const docker = {
  getNetwork: () => ({ inspect: async () => ({ Id: 'f'.repeat(64), Name: 'sbx', Driver: 'bridge', Options: {}, Containers: {} }) }),
} as unknown as Docker;

describe('sandbox isolation where no firewall can be installed', () => {
  let path: string | undefined;
  let emptyBin = '';
  beforeEach(() => {
    // No iptables on PATH and no helper image: nothing can install the rules.
    path = process.env.PATH;
    emptyBin = mkdtempSync(join(tmpdir(), 'no-iptables-'));
    process.env.PATH = emptyBin;
  });
  afterEach(() => {
    process.env.PATH = path;
    rmSync(emptyBin, { recursive: true, force: true });
  });

  it('warns loudly and carries on in warn mode', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    expect(await isolateSandboxNetwork({ docker, network: 'sbx', logger, mode: 'warn' })).toBeUndefined();
    const entry = JSON.parse(lines.find((l) => l.includes('SANDBOX ISOLATION IS OFF'))!);
    expect(entry.level).toBe(50);
    expect(entry.msg).toMatch(/apt-get install iptables/);
    expect(entry.msg).toMatch(/TIDEPOOL_SANDBOX_ISOLATION=require/);
  });

  it('refuses to start in require mode', async () => {
    await expect(isolateSandboxNetwork({ docker, network: 'sbx', logger: pino({ level: 'silent' }), mode: 'require' })).rejects.toThrow(/SANDBOX ISOLATION IS OFF/);
  });
});

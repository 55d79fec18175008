import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const started: TestPlatform[] = [];
afterAll(async () => {
  for (const platform of started) await platform.dispose().catch(() => undefined);
});

const mode = (path: string): number => statSync(path).mode & 0o777;

describe('data directory', () => {
  it('tightens the permissions of an existing data directory and database (0700 / 0600)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-perms-'));
    chmodSync(dataDir, 0o755);
    const first = await startTestPlatform({}, dataDir);
    await first.close();
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, 'tidepool.db'), 0o644);
    const again = await startTestPlatform({}, dataDir);
    started.push(again);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(join(dataDir, 'tidepool.db'))).toBe(0o600);
  });

  it('creates a new data directory 0700 with its database 0600', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'tidepool-perms-')), 'nested', 'data');
    const platform = await startTestPlatform({}, dataDir);
    started.push(platform);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(join(dataDir, 'tidepool.db'))).toBe(0o600);
  });

  it('refuses a second platform on the same data directory, naming the pid that holds it', async () => {
    const first = await startTestPlatform();
    started.push(first);
    expect(readFileSync(join(first.dataDir, 'tidepool.lock'), 'utf8').trim()).toBe(String(process.pid));
    await expect(startTestPlatform({}, first.dataDir)).rejects.toThrow(`is in use by another Tidepool platform (pid ${process.pid})`);
    // The failed start took nothing away: once the first one stops, the directory is free again.
    await first.close();
    const second = await startTestPlatform({ apiKeys: [first.apiKey] }, first.dataDir);
    started.push(second);
  });

  it('takes over a lock naming its own pid that it does not hold (a restarted container is pid 1 again)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-samepid-'));
    writeFileSync(join(dataDir, 'tidepool.lock'), `${process.pid}\n`);
    const platform = await startTestPlatform({}, dataDir);
    started.push(platform);
    expect(readFileSync(join(dataDir, 'tidepool.lock'), 'utf8').trim()).toBe(String(process.pid));
  });

  it('takes over a stale lock whose process is gone', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-stale-'));
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(join(dataDir, 'tidepool.lock'), `${gone.stdout}\n`);
    const platform = await startTestPlatform({}, dataDir);
    started.push(platform);
    expect(readFileSync(join(dataDir, 'tidepool.lock'), 'utf8').trim()).toBe(String(process.pid));
  });
});

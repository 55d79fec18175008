import { describe, expect, it } from 'vitest';
import tar from 'tar-stream';
import { ENVD_TOKEN_FILE, ENVD_TOKEN_MTIME, envdTokenArchive, envdWaitsForToken, unguessableTokenFile } from './envd-birth-token.ts';

describe('envd birth token', () => {
  it('knows which envd versions wait for a token written after the start', () => {
    expect(envdWaitsForToken('0.6.14')).toBe(true);
    expect(envdWaitsForToken('0.7.0')).toBe(true);
    expect(envdWaitsForToken('1.0.0')).toBe(true);
    expect(envdWaitsForToken('0.6.13')).toBe(false);
    expect(envdWaitsForToken('0.5.99')).toBe(false);
    expect(envdWaitsForToken('0.0.0')).toBe(false);
    expect(envdWaitsForToken(undefined)).toBe(false);
    expect(envdWaitsForToken('not-a-version')).toBe(false);
  });

  it('names a fresh, unguessable token file under the root-only directory each time', () => {
    const a = unguessableTokenFile();
    const b = unguessableTokenFile();
    expect(a).not.toBe(b);
    expect(a).toMatch(new RegExp(`^${ENVD_TOKEN_FILE}-[0-9a-f]{32}$`));
  });

  it('writes the directory and then the token, the token with its fixed past mtime (envd waits for it)', async () => {
    const file = unguessableTokenFile();
    const entries: { name: string; mtime: number | undefined; mode: number | undefined }[] = [];
    const extract = tar.extract();
    extract.on('entry', (header, stream, next) => {
      entries.push({ name: header.name, mtime: header.mtime?.getTime(), mode: header.mode });
      stream.resume();
      stream.on('end', next);
    });
    const done = new Promise((resolve) => extract.on('finish', resolve));
    envdTokenArchive('t', file).pipe(extract);
    await done;
    expect(entries.map((e) => e.name)).toEqual(['run/tidepool/', file.slice(1)]);
    expect(entries[1]).toMatchObject({ mtime: Date.UTC(2000, 0, 1), mode: 0o600 });
    expect(ENVD_TOKEN_MTIME.getTime()).toBe(Date.UTC(2000, 0, 1));
  });

  it('refuses to write a token outside its directory', () => {
    expect(() => envdTokenArchive('t', '/etc/passwd')).toThrow(/outside/);
    expect(() => envdTokenArchive('t', unguessableTokenFile())).not.toThrow();
  });
});

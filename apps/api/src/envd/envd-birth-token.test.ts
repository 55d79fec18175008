import { describe, expect, it } from 'vitest';
import tar from 'tar-stream';
import { ENVD_TOKEN_FILE, envdTokenArchive, envdWaitsForToken, tokenWrittenMarker, unguessableTokenFile } from './envd-birth-token.ts';

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

  it('writes the directory, the token and then its marker, in that order', async () => {
    const file = unguessableTokenFile();
    const names: string[] = [];
    const extract = tar.extract();
    extract.on('entry', (header, stream, next) => {
      names.push(header.name);
      stream.resume();
      stream.on('end', next);
    });
    const done = new Promise((resolve) => extract.on('finish', resolve));
    envdTokenArchive('t', file).pipe(extract);
    await done;
    expect(names).toEqual(['run/tidepool/', file.slice(1), tokenWrittenMarker(file).slice(1)]);
  });

  it('refuses to write a token outside its directory', () => {
    expect(() => envdTokenArchive('t', '/etc/passwd')).toThrow(/outside/);
    expect(() => envdTokenArchive('t', unguessableTokenFile())).not.toThrow();
  });
});

import { describe, expect, it } from 'vitest';
import type { BuildStep } from '../template-model.ts';
import { parseAccounts, resolveOwner, resolveUser } from './accounts.ts';
import { firstForcedStep, initialChainHash, layerTag, stepChainHash } from './chain-hash.ts';
import { envListToRecord, expandEnvValue } from './env-expansion.ts';
import { applyImageAlias, canonicalImageRef, parseImageRef, pullableRef } from './image-ref.ts';
import { LineSplitter } from './line-splitter.ts';
import { stepLabel } from './step-text.ts';

const run = (cmd: string, force = false): BuildStep => ({ type: 'RUN', args: [cmd], force });
const start = { baseImageId: 'sha256:aaa', runtimeHash: 'r1', defaults: { user: 'user', workdir: '/home/user', envs: {} }, scope: 'p', team: 'team-a' };

describe('chain hash', () => {
  it('depends on everything before a step and on the step itself', () => {
    const h0 = initialChainHash(start);
    expect(h0).toMatch(/^[0-9a-f]{64}$/);
    expect(initialChainHash({ ...start, runtimeHash: 'r2' })).not.toBe(h0);
    expect(initialChainHash({ ...start, baseImageId: 'sha256:bbb' })).not.toBe(h0);
    expect(initialChainHash({ ...start, defaults: { ...start.defaults, envs: { A: '1' } } })).not.toBe(h0);
    // Teams never share a cached layer: the same steps (files hash included) of another team key differently.
    expect(initialChainHash({ ...start, team: 'team-b' })).not.toBe(h0);
    const a = stepChainHash(h0, run('echo a'));
    expect(stepChainHash(h0, run('echo a'))).toBe(a);
    expect(stepChainHash(h0, run('echo b'))).not.toBe(a);
    expect(stepChainHash(h0, { type: 'COPY', args: ['a', '/a', '', ''], force: false, filesHash: '1' })).not.toBe(
      stepChainHash(h0, { type: 'COPY', args: ['a', '/a', '', ''], force: false, filesHash: '2' }),
    );
    // args are hashed as a list: no ambiguity between ['a b'] and ['a', 'b']
    expect(stepChainHash(h0, { type: 'ENV', args: ['a b'], force: false })).not.toBe(stepChainHash(h0, { type: 'ENV', args: ['a', 'b'], force: false }));
    expect(layerTag(a)).toBe(`tidepool/layer:${a}`);
  });

  it('finds where the cache stops counting', () => {
    expect(firstForcedStep([run('a'), run('b', true), run('c')], false)).toBe(1);
    expect(firstForcedStep([run('a'), run('b')], false)).toBe(2);
    expect(firstForcedStep([run('a'), run('b')], true)).toBe(0);
  });
});

describe('env expansion', () => {
  const vars: Record<string, string> = { PATH: '/usr/bin', HOME: '/root', EMPTY: '' };
  const lookup = (name: string) => vars[name];
  it('expands $VAR, ${VAR} and the :- and :+ forms', () => {
    expect(expandEnvValue('/opt/bin:$PATH', lookup)).toBe('/opt/bin:/usr/bin');
    expect(expandEnvValue('${HOME}/x', lookup)).toBe('/root/x');
    expect(expandEnvValue('${NOPE:-fallback} ${EMPTY:-e} ${HOME:+set}', lookup)).toBe('fallback e set');
    expect(expandEnvValue('\\$HOME costs $5 and $', lookup)).toBe('$HOME costs $5 and $');
    expect(expandEnvValue('$UNKNOWN-x', lookup)).toBe('-x');
  });
  it('reads an image Env list', () => {
    expect(envListToRecord(['A=1', 'B=x=y', 'bad'])).toEqual({ A: '1', B: 'x=y' });
  });
});

describe('accounts', () => {
  const accounts = parseAccounts('root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n', 'root:x:0:\nuser:x:1000:\nstaff:x:50:\n');
  it('resolves users by name or uid', () => {
    expect(resolveUser(accounts, 'user').uid).toBe(1000);
    expect(resolveUser(accounts, '1000').name).toBe('user');
    expect(resolveUser(accounts, 'user:staff').name).toBe('user');
    expect(() => resolveUser(accounts, 'ghost')).toThrow(/does not exist/);
  });
  it('resolves owners of copied files', () => {
    expect(resolveOwner(accounts, 'user')).toEqual({ uid: 1000, gid: 1000 });
    expect(resolveOwner(accounts, 'user:staff')).toEqual({ uid: 1000, gid: 50 });
    expect(resolveOwner(accounts, '2000')).toEqual({ uid: 2000, gid: 2000 });
    expect(resolveOwner(accounts, '2000:7')).toEqual({ uid: 2000, gid: 7 });
    expect(resolveOwner(parseAccounts('', ''), 'root')).toEqual({ uid: 0, gid: 0 });
    expect(() => resolveOwner(accounts, 'user:nogroup')).toThrow(/group 'nogroup'/);
  });
});

describe('image references', () => {
  it('parses registries, repositories, tags and digests', () => {
    expect(parseImageRef('python:3.12')).toEqual({ registry: 'docker.io', repository: 'library/python', tag: '3.12', digest: undefined });
    expect(parseImageRef('127.0.0.1:5000/x/y:t')).toEqual({ registry: '127.0.0.1:5000', repository: 'x/y', tag: 't', digest: undefined });
    expect(parseImageRef('localhost/x').registry).toBe('localhost');
    expect(parseImageRef('ghcr.io/o/r@sha256:abc')).toMatchObject({ registry: 'ghcr.io', digest: 'sha256:abc', tag: undefined });
    expect(canonicalImageRef('docker.io/library/python')).toBe(canonicalImageRef('python:latest'));
    expect(pullableRef('e2bdev/base')).toBe('e2bdev/base:latest');
    expect(pullableRef('127.0.0.1:5000/x')).toBe('127.0.0.1:5000/x:latest');
  });
  it('applies aliases whatever the spelling', () => {
    const aliases = { 'e2bdev/base': 'tidepool/base:latest' };
    expect(applyImageAlias('e2bdev/base', aliases)).toBe('tidepool/base:latest');
    expect(applyImageAlias('docker.io/e2bdev/base:latest', aliases)).toBe('tidepool/base:latest');
    expect(applyImageAlias('e2bdev/base:other', aliases)).toBe('e2bdev/base:other');
  });
});

describe('log lines', () => {
  it('splits streamed output into lines, keeps the last state of progress bars and cuts long lines', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter((l) => lines.push(l));
    splitter.push('a\nb');
    splitter.push('c\r\n10%\r50%\r100%\n');
    splitter.push('x'.repeat(9000));
    splitter.push('\ntail');
    splitter.end();
    expect(lines.slice(0, 3)).toEqual(['a', 'bc', '100%']);
    expect(lines[3]).toMatch(/^x{8192}… \(line cut\)$/);
    expect(lines[4]).toBe('tail');
  });
  it('labels steps for the log', () => {
    expect(stepLabel(2, 20, { type: 'COPY', args: ['a', '/b', 'user', '0644'], force: false })).toBe('[3/20] COPY --chown=user --chmod=0644 a /b');
    expect(stepLabel(0, 1, { type: 'ENV', args: ['A', '1', 'B', '2'], force: false })).toBe('[1/1] ENV A=1 B=2');
    expect(stepLabel(0, 1, { type: 'RUN', args: ['id', 'root'], force: false })).toBe('[1/1] RUN id (as root)');
  });
});

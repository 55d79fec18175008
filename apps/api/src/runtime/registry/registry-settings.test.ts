import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config.ts';
import { isPullable, isUnderPrefix, loadRegistrySettings, registryReference, registrySettingsProblem } from './registry-settings.ts';
import { checkCall } from '../../node-agent/runtime-dispatch.ts';
import { checkImageCall } from '../../node-agent/image-dispatch.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-registry-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const base = { registry: '', registryUsername: '', registryPasswordFile: '', registryInsecure: false };

describe('registry settings', () => {
  it('accepts host[:port][/path] and names every image <prefix>/<kind>:<tag>', () => {
    for (const registry of ['registry.example.com', '198.19.0.1:5000', 'localhost:5000/tidepool/cluster', 'localhost']) expect(registrySettingsProblem({ ...base, registry })).toBeUndefined();
    expect(registryReference('198.19.0.1:5000/tp', 'template', 'tpl1-b2')).toBe('198.19.0.1:5000/tp/template:tpl1-b2');
    expect(registryReference('r.example:1', 'sandbox', 'a/b c')).toBe('r.example:1/sandbox:a_b_c');
  });

  it('refuses what the engine would misread, with the variable named', () => {
    expect(registrySettingsProblem({ ...base, registry: 'https://r.example.com' })).toContain('TIDEPOOL_REGISTRY');
    expect(registrySettingsProblem({ ...base, registry: 'myregistry/path' })).toContain('Docker Hub namespace');
    expect(registrySettingsProblem({ ...base, registry: 'r.example.com/Upper' })).toContain('host[:port][/path]');
    expect(registrySettingsProblem({ ...base, registry: 'r.example.com/../x' })).toContain('host[:port][/path]');
    expect(registrySettingsProblem({ ...base, registry: 'r.example.com', registryUsername: 'u' })).toContain('go together');
    expect(registrySettingsProblem({ ...base, registryUsername: 'u', registryPasswordFile: '/x' })).toContain('TIDEPOOL_REGISTRY is not');
    expect(() => loadConfig({ TIDEPOOL_REGISTRY: 'http://x' })).toThrow(ConfigError);
    expect(loadConfig({ TIDEPOOL_REGISTRY: 'r.example.com:5000/tp', TIDEPOOL_REGISTRY_INSECURE: 'on' })).toMatchObject({ registry: 'r.example.com:5000/tp', registryInsecure: true });
  });

  it('reads the password from its file, never from the environment, and names an unreadable file', () => {
    const file = join(dir, 'password');
    writeFileSync(file, 's3cret\nignored\n');
    expect(loadRegistrySettings({ ...base, registry: 'r.example.com', registryUsername: 'u', registryPasswordFile: file })).toMatchObject({ host: 'r.example.com', prefix: 'r.example.com', username: 'u', password: 's3cret' });
    expect(() => loadRegistrySettings({ ...base, registry: 'r.example.com', registryUsername: 'u', registryPasswordFile: join(dir, 'missing') })).toThrow(/TIDEPOOL_REGISTRY_PASSWORD_FILE: cannot read/);
    writeFileSync(join(dir, 'empty'), '\n');
    expect(() => loadRegistrySettings({ ...base, registry: 'r.example.com', registryUsername: 'u', registryPasswordFile: join(dir, 'empty') })).toThrow(/is empty/);
  });

  it('only the platform repositories under the prefix count as its images', () => {
    const prefix = '198.19.0.1:5000/tp';
    expect(isUnderPrefix(prefix, `${prefix}/template:t1-b1`)).toBe(true);
    for (const ref of [`${prefix}/other:t1`, '198.19.0.1:5000/template:t1', `${prefix}/template`, `${prefix}/template:t1@sha256:${'a'.repeat(64)}`, `${prefix}/sub/template:t1`, 'docker.io/library/alpine:latest', `${prefix}x/template:t1`]) {
      expect(isUnderPrefix(prefix, ref), ref).toBe(false);
    }
  });
});

describe('registry calls on the node channel', () => {
  it('a push names only <kind>:<tag> (no host, no path, no other repository); a pull takes one image reference', () => {
    expect(checkCall('pushImage', { args: ['tidepool/snapshot:abc', 'snapshot:abc'] })).toHaveLength(2);
    for (const name of ['evil.example.com/x:1', '../template:x', 'template', 'library/alpine:latest', 'template:../x', 'template:a/b']) {
      expect(() => checkCall('pushImage', { args: ['tidepool/snapshot:abc', name] }), name).toThrow(/invalid arguments/);
    }
    // No credentials travel in a call: an extra argument is refused.
    expect(() => checkCall('pullImage', { args: ['198.19.0.1:5000/template:t1', { username: 'u', password: 'p' }] })).toThrow(/invalid arguments/);
    expect(checkCall('pullImage', { args: ['198.19.0.1:5000/template:t1'] })).toHaveLength(1);
  });

  it('image-engine calls: work containers must be build containers, paths clean, no unknown methods', () => {
    const spec = { image: 'tidepool/base:latest', name: 'tp-build-1', labels: { 'dev.tidepool.build-role': 'container' }, entrypoint: ['/bin/true'], cmd: [], user: '0:0', cpuCount: 1, memoryMB: 512, network: false };
    expect(checkImageCall('createContainer', { args: [spec] })).toHaveLength(1);
    expect(() => checkImageCall('createContainer', { args: [{ ...spec, labels: {} }] })).toThrow(/invalid arguments/);
    expect(() => checkImageCall('createContainer', { args: [{ ...spec, binds: ['/:/host'] }] })).toThrow(/invalid arguments/);
    expect(checkImageCall('statPath', { args: ['abc123', '/'] })).toHaveLength(2);
    for (const path of ['etc/passwd', '/a/../b', '/a/./b', '/a\u0000b']) expect(() => checkImageCall('readFile', { args: ['abc123', path] }), path).toThrow(/invalid arguments/);
    for (const method of ['exec', 'constructor', '__proto__', 'writeArchive']) expect(() => checkImageCall(method, { args: [] })).toThrow(/unknown image method/);
  });
});

describe('node images in the registry', () => {
  it('lists the configured node images that name the registry host, and nothing else is pullable beyond the platform\'s own', () => {
    const settings = loadRegistrySettings({
      registry: 'r.example.com:5000/tidepool',
      registryUsername: '',
      registryPasswordFile: '',
      registryInsecure: false,
      baseImage: 'r.example.com:5000/tidepool/base:1',
      runtimeImage: 'tidepool/envd-runtime:latest',
      codeInterpreterImage: 'other.example.com/ci:1',
    })!;
    expect(settings.nodeImages).toEqual(['r.example.com:5000/tidepool/base:1']);
    expect(isPullable(settings, 'r.example.com:5000/tidepool/base:1')).toBe(true);
    expect(isPullable(settings, 'r.example.com:5000/tidepool/template:t1')).toBe(true);
    expect(isPullable(settings, 'r.example.com:5000/tidepool/base:2')).toBe(false);
    expect(isPullable(settings, 'other.example.com/ci:1')).toBe(false);
  });
});

import { createServer } from 'node:http';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { checkCall, runCall } from './runtime-dispatch.ts';
import { egressPolicy, validateNetwork } from '../sandboxes/egress/network-rules.ts';

const logger = pino({ level: 'silent' });
const container = 'a'.repeat(64);
const init = { envVars: { PATH: '/usr/bin', EMPTY: '' }, defaultUser: 'user', defaultWorkdir: '' };
const spec = { sandboxId: 'isb1abc', templateId: 'base', image: 'tidepool/base:latest', cpuCount: 1, memoryMB: 512, envdAccessToken: 'tok_123' };

function refused(method: string, body: unknown, options = {}): string {
  try {
    checkCall(method, body, options);
  } catch (error) {
    expect(error).toBeInstanceOf(NodeChannelError);
    expect((error as NodeChannelError).code).toBe('bad_call');
    return (error as Error).message;
  }
  throw new Error(`${method} ${JSON.stringify(body)} was accepted`);
}

describe('node agent call checks', () => {
  it('accepts every SandboxRuntime method with well-formed arguments', () => {
    expect(checkCall('prepare', { args: [] })).toEqual([]);
    expect(checkCall('startContainer', { args: [{ ...spec, egress: { allow: ['10.0.0.0/8'], deny: ['0.0.0.0/0'], domains: ['*.example.com'] }, pool: 'base' }] })).toHaveLength(1);
    expect(checkCall('commit', { args: [container, 'localhost:5000/tpl/x:v1', { 'dev.tidepool.role': 'build' }] })).toHaveLength(3);
    expect(checkCall('commit', { args: [container, 'tidepool/paused:isb1'] })).toHaveLength(2);
    // template build images: the tag may hold dots (template ids and build ids pass through tagPart)
    expect(checkCall('imageExists', { args: ['tidepool/template:my..tpl-b1.2'] })).toHaveLength(1);
    for (const image of ['../x', 'a/../b', './a', 'a/./b', 'reg..host/a']) expect(refused('imageExists', { args: [image] })).toContain('invalid arguments');
    expect(checkCall('applyEgress', { args: ['isb1', '172.18.0.5', { allow: [], deny: [] }] })).toHaveLength(3);
    expect(checkCall('imageExists', { args: ['sha256:' + 'f'.repeat(64)] })).toHaveLength(1);
    for (const method of ['pause', 'unpause', 'remove', 'inspect']) expect(checkCall(method, { args: [container] })).toEqual([container]);
  });

  it('refuses anything outside the call table (no raw engine passthrough)', () => {
    for (const method of ['exec', 'constructor', '__proto__', 'toString', 'watchEventz', 'hasOwnProperty']) expect(refused(method, { args: [] })).toContain('unknown method');
  });

  it('refuses malformed bodies and arguments with what is wrong', () => {
    expect(refused('pause', null)).toContain('{"args": [...]}');
    expect(refused('pause', { args: 'x' })).toContain('{"args": [...]}');
    expect(refused('pause', { args: [container], extra: 1 })).toContain('unexpected field');
    expect(refused('pause', { args: [] })).toContain('invalid arguments');
    expect(refused('pause', { args: [container, 'more'] })).toContain('invalid arguments');
    // container ids and image names become engine URL paths: no slashes, no dot-dot
    for (const id of ['../../containers/x', 'a/b', '', 'x'.repeat(200), 'abc?force=1']) expect(refused('remove', { args: [id] })).toContain('invalid arguments');
    for (const image of ['../containers/abc', 'repo/CASE', 'a b', '/etc/passwd', 'x:tag/../..']) expect(refused('removeImage', { args: [image] })).toContain('invalid arguments');
    expect(refused('startContainer', { args: [{ ...spec, privileged: true }] })).toContain('invalid arguments');
    expect(refused('startContainer', { args: [{ ...spec, memoryMB: -1 }] })).toContain('invalid arguments');
    expect(refused('startContainer', { args: [{ ...spec, sandboxId: 'a/b' }] })).toContain('invalid arguments');
    expect(refused('applyEgress', { args: ['isb1', 'not-an-ip', { allow: [], deny: [] }] })).toContain('invalid arguments');
    expect(refused('applyEgress', { args: ['isb1', '10.0.0.1', { allow: ['10.0.0.0/1234'], deny: [] }] })).toContain('invalid arguments');
    expect(refused('applyEgress', { args: ['isb1', '10.0.0.1', { allow: [], deny: [], domains: ['a b.com'] }] })).toContain('invalid arguments');
  });

  it('accepts every egress policy the API itself makes from a valid network (the two sides agree)', () => {
    const networks = [
      { allowOut: ['10.0.0.0/08', '1.2.3.4', '-a.example.com', '*.b-c.example.org', 'EXAMPLE.com'], denyOut: ['0.0.0.0/0'] },
      { allowOut: [], denyOut: ['192.168.1.7', '172.16.0.0/12'] },
      {},
    ];
    for (const network of networks) {
      validateNetwork(network);
      const policy = egressPolicy(network);
      expect(checkCall('applyEgress', { args: ['isb1', '172.18.0.5', policy] })).toHaveLength(3);
      expect(checkCall('startContainer', { args: [{ ...spec, egress: policy }] })).toHaveLength(1);
    }
  });

  it('binds only directories inside the node’s volumes root', () => {
    const mount = (source: string) => ({ args: [{ ...spec, directories: [{ source, target: '/data' }] }] });
    expect(checkCall('startContainer', mount('/var/lib/tidepool/volumes/v1'), { volumesRoot: '/var/lib/tidepool/volumes' })).toHaveLength(1);
    expect(refused('startContainer', mount('/var/lib/tidepool/volumes/v1'))).toContain('binds no host directories');
    for (const source of ['/', '/etc', '/var/lib/tidepool/volumes', '/var/lib/tidepool/volumes-other/x', '/var/run/docker.sock']) {
      expect(refused('startContainer', mount(source), { volumesRoot: '/var/lib/tidepool/volumes' })).toMatch(/not inside|invalid arguments/);
    }
    expect(refused('startContainer', mount('/var/lib/tidepool/volumes/../../../etc'), { volumesRoot: '/var/lib/tidepool/volumes' })).toContain('invalid arguments');
  });

  it('shapes results for the wire: undefined → null, egress failures as a message', async () => {
    const runtime = {
      inspect: async () => ({ status: 'missing', address: undefined }),
      startContainer: async () => ({ containerId: container, address: '172.18.0.9', egressApplied: Promise.reject(new Error('iptables failed')) }),
      pause: async () => undefined,
    } as unknown as SandboxRuntime;
    expect(await runCall(runtime, 'inspect', [container], logger)).toEqual({ status: 'missing', address: null });
    expect(await runCall(runtime, 'pause', [container], logger)).toBeNull();
    expect(await runCall(runtime, 'startContainer', [spec], logger)).toEqual({ containerId: container, address: '172.18.0.9', egressError: 'iptables failed' });
  });

  it('bootContainer (protocol 2): a spec and its /init only — no token, no other field, bounded', () => {
    expect(checkCall('bootContainer', { args: [spec, init] })).toHaveLength(2);
    expect(refused('bootContainer', { args: [spec] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [spec, { ...init, accessToken: 'another sandbox\'s' }] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [spec, { ...init, envVars: { 'A=B': 'x' } }] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [spec, { ...init, envVars: { A: 'a\u0000b' } }] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [spec, { ...init, envVars: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [`V${i}`, ''])) }] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [spec, { ...init, defaultUser: 'x'.repeat(257) }] })).toContain('invalid arguments');
    expect(refused('bootContainer', { args: [{ ...spec, privileged: true }, init] })).toContain('invalid arguments');
    // the same bind rule as startContainer
    expect(refused('bootContainer', { args: [{ ...spec, directories: [{ source: '/etc', target: '/data' }] }, init] }, { volumesRoot: '/var/lib/tidepool/volumes' })).toMatch(/bootContainer: directory "\/etc" is not inside/);
  });

  it('bootContainer boots on the node and answers envd\'s version cut to what the call table carries', async () => {
    // A stand-in envd that answers /init with an overlong version (whatever runs in a sandbox may answer anything).
    const envd = createServer((request, response) => {
      request.resume();
      request.once('end', () => response.writeHead(request.url === '/init' ? 204 : 200, { 'x-envd-version': 'v'.repeat(300) }).end());
    });
    await new Promise<void>((resolve) => envd.listen(ENVD_PORT, '127.77.1.1', () => resolve()));
    try {
      const runtime = {
        startContainer: async () => ({ containerId: container, address: '127.77.1.1' }),
        inspect: async () => ({ status: 'running', address: '127.77.1.1' }),
        remove: async () => undefined,
      } as unknown as SandboxRuntime;
      const result = (await runCall(runtime, 'bootContainer', [spec, init], logger)) as { envdVersion: string };
      expect(result).toEqual({ containerId: container, address: '127.77.1.1', envdVersion: 'v'.repeat(64) });
    } finally {
      await new Promise<void>((resolve) => envd.close(() => resolve()));
    }
  });
});

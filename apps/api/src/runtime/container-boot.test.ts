import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { EnvdUnavailableError } from '../envd/envd-client.ts';
import { bootContainer } from './container-boot.ts';
import type { ContainerSpec, SandboxRuntime, StartedContainer } from './sandbox-runtime.ts';

const logger = pino({ level: 'silent' });
const spec: ContainerSpec = { sandboxId: 'isb_boot', templateId: 'base', image: 'tidepool/base:latest', cpuCount: 1, memoryMB: 512, envdAccessToken: 'tok_boot' };
const init = { envVars: { A: '1' }, defaultUser: 'user', defaultWorkdir: '/home/user' };
let envd: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (envd ? envd.close(() => resolve()) : resolve()));
  envd = undefined;
});

/** A stand-in envd on `address`:ENVD_PORT answering /health and /init (with `initStatus`); records the /init requests. */
async function standInEnvd(address: string, initStatus = 204): Promise<Array<{ token: string | undefined; body: Record<string, unknown> }>> {
  const inits: Array<{ token: string | undefined; body: Record<string, unknown> }> = [];
  const read = async (request: IncomingMessage): Promise<string> => {
    let text = '';
    for await (const chunk of request) text += String(chunk);
    return text;
  };
  envd = createServer((request, response) => {
    void read(request).then((text) => {
      if (request.url === '/init') {
        inits.push({ token: request.headers['x-access-token'] as string | undefined, body: JSON.parse(text) as Record<string, unknown> });
        response.writeHead(initStatus, { 'x-envd-version': '0.9.1' }).end(initStatus === 204 ? undefined : 'no');
        return;
      }
      response.writeHead(request.url === '/health' ? 204 : 404).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    envd!.once('error', reject);
    envd!.listen(ENVD_PORT, address, () => resolve());
  });
  expect((envd.address() as AddressInfo).port).toBe(ENVD_PORT);
  return inits;
}

/** A runtime whose one container lives at `address`; records removals. */
function runtimeAt(address: string, started: Partial<StartedContainer> = {}, status: 'running' | 'stopped' = 'running'): SandboxRuntime & { removed: string[] } {
  const removed: string[] = [];
  return {
    removed,
    startContainer: async () => ({ containerId: 'c'.repeat(64), address, ...started }),
    inspect: async () => ({ status, address }),
    remove: async (id: string) => {
      removed.push(id);
    },
  } as unknown as SandboxRuntime & { removed: string[] };
}

describe('a container boot (the embedded node in-process, a node agent inside bootContainer)', () => {
  it('starts, waits for envd, sends /init with the spec\'s own token and answers envd\'s version', async () => {
    const inits = await standInEnvd('127.77.0.1');
    const runtime = runtimeAt('127.77.0.1');
    expect(await bootContainer(runtime, spec, init, logger)).toEqual({ containerId: 'c'.repeat(64), address: '127.77.0.1', envdVersion: '0.9.1' });
    expect(inits).toHaveLength(1);
    expect(inits[0]!.token).toBe('tok_boot');
    expect(inits[0]!.body).toMatchObject({ ...init, accessToken: 'tok_boot' });
    expect(runtime.removed).toEqual([]);
  });

  it('an envd that refuses /init: the container is removed and the error says why', async () => {
    await standInEnvd('127.77.0.2', 401);
    const runtime = runtimeAt('127.77.0.2');
    const error = await bootContainer(runtime, spec, init, logger).then(() => undefined, (e: unknown) => e as Error);
    expect(error).toBeInstanceOf(EnvdUnavailableError);
    expect(error!.message).toMatch(/envd rejected \/init \(status 401/);
    expect(runtime.removed).toEqual(['c'.repeat(64)]);
  });

  it('a container that exits before envd listens: removed, typed error', async () => {
    const runtime = runtimeAt('127.77.0.3', {}, 'stopped');
    await expect(bootContainer(runtime, spec, init, logger)).rejects.toThrow(/exited before envd started/);
    expect(runtime.removed).toEqual(['c'.repeat(64)]);
  });

  it('egress rules that fail: removed, no /init sent', async () => {
    const inits = await standInEnvd('127.77.0.4');
    const egressApplied = Promise.reject(new Error('iptables failed'));
    egressApplied.catch(() => undefined);
    const runtime = runtimeAt('127.77.0.4', { egressApplied });
    await expect(bootContainer(runtime, spec, init, logger)).rejects.toThrow('iptables failed');
    expect(runtime.removed).toEqual(['c'.repeat(64)]);
    expect(inits).toEqual([]);
  });
});

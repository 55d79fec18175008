import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import { VolumeStorage } from '../volumes/volume-storage.ts';
import { type AgentVolumes, startAgentVolumes, VOLUME_CONTENT_PATH } from './agent-volumes.ts';

const logger = pino({ level: 'silent' });
const ID = 'vol_abcdefghij0123456789';
let dir: string;
let volumes: AgentVolumes;
let server: Server;
let origin: string;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tp-agent-volumes-'));
  volumes = await startAgentVolumes(new VolumeStorage(join(dir, 'volumes'), '/host/volumes', logger), logger, 1024 ** 3);
  // What the agent server does for paths of the content API: hand the request over as it came.
  server = createServer((request, response) => {
    if (VOLUME_CONTENT_PATH.test((request.url ?? '').split('?')[0])) volumes.serveContent(request, response);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  await new Promise((resolve) => server.close(resolve));
  await volumes.close();
  rmSync(dir, { recursive: true, force: true });
});

const refusal = async (method: string, body: unknown): Promise<string | undefined> => {
  try {
    await volumes.call(method, body);
    return undefined;
  } catch (error) {
    return error instanceof NodeChannelError ? error.code : 'other';
  }
};

describe('a node agent\'s volumes', () => {
  it('makes, names and removes volume directories; refuses anything but a volume id', async () => {
    expect(await volumes.call('create', { args: [ID] })).toBeNull();
    expect(existsSync(join(dir, 'volumes', ID))).toBe(true);
    // A create retried after a lost answer keeps what is there.
    writeFileSync(join(dir, 'volumes', ID, 'kept'), 'x');
    await volumes.call('create', { args: [ID] });
    expect(existsSync(join(dir, 'volumes', ID, 'kept'))).toBe(true);
    expect(await volumes.call('hostDir', { args: [ID] })).toBe(`/host/volumes/${ID}`);
    for (const bad of [['../etc'], ['vol_ABCDEFGHIJ0123456789'], [`${ID}/x`], [], [ID, ID], [42]]) expect(await refusal('create', { args: bad })).toBe('bad_call');
    expect(await refusal('create', { args: [ID], extra: true })).toBe('bad_call');
    expect(await refusal('create', null)).toBe('bad_call');
    expect(await refusal('chmod', { args: [ID] })).toBe('bad_call');
    await volumes.call('remove', { args: [ID] });
    expect(existsSync(join(dir, 'volumes', ID))).toBe(false);
  });

  it('serves the content API of its volumes without a token (the API checked it) and 404s a volume it does not hold', async () => {
    await volumes.call('create', { args: [ID] });
    const put = await fetch(`${origin}/v1/volumecontent/${ID}/file?path=/a.txt`, { method: 'PUT', body: 'hello' });
    expect(put.status).toBe(201);
    const read = await fetch(`${origin}/v1/volumecontent/${ID}/file?path=/a.txt`);
    expect(await read.text()).toBe('hello');
    const listed = (await (await fetch(`${origin}/v1/volumecontent/${ID}/dir?path=/`)).json()) as Array<{ name: string }>;
    expect(listed.map((e) => e.name)).toEqual(['a.txt']);
    const other = await fetch(`${origin}/v1/volumecontent/vol_zzzzzzzzzzzzzzzzzzzz/dir?path=/`);
    expect(other.status).toBe(404);
  });
});

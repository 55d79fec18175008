/**
 * A build node that lacks a node image of the settings (here TIDEPOOL_BASE_IMAGE in the cluster registry) pulls it
 * the first time a build looks for it, with the node's registry credentials; any other name it lacks stays missing.
 * Real parts: the host's engine and a registry with htpasswd on loopback (testkit).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBusyboxImage, run, startLocalRegistry, type LocalRegistry } from '@tidepool/testkit';
import { RegistryImages } from '../registry/registry-images.ts';
import { loadRegistrySettings } from '../registry/registry-settings.ts';
import { DockerImageEngine } from './docker-image-engine.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-node-images-'));
const path = `tp-node-images-${randomBytes(4).toString('hex')}`;
let registry: LocalRegistry | undefined;
let reference = '';

beforeAll(async () => {
  registry = await startLocalRegistry();
  reference = await registry.push(await ensureBusyboxImage(), `${path}/base:latest`);
  // Only in the registry now: the host engine keeps the image under its own name, not this one.
  await run('docker', ['rmi', reference]);
}, 300_000);

afterAll(async () => {
  if (reference) await run('docker', ['rmi', reference]);
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('DockerImageEngine with node images in the registry', () => {
  it('pulls a node image it lacks on first look; another name of the registry stays missing', async () => {
    const passwordFile = join(dir, 'password');
    writeFileSync(passwordFile, `${registry!.password}\n`);
    const settings = loadRegistrySettings({ registry: `${registry!.host}/${path}`, registryUsername: registry!.username, registryPasswordFile: passwordFile, registryInsecure: true, baseImage: reference })!;
    const docker = new Docker();
    const engine = new DockerImageEngine({ docker, network: 'bridge', nodeImages: new RegistryImages(docker, settings, pino({ level: 'silent' })) });
    expect(await engine.inspectImage(`${registry!.host}/${path}/base:other`)).toBeUndefined();
    const info = await engine.inspectImage(reference);
    expect(info?.tags).toContain(reference);
  }, 120_000);
});

import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBaseImage, removeTree } from '@tidepool/testkit';
import Docker from 'dockerode';
import type { Config } from '../../src/config.ts';
import { PLATFORM_LABEL } from '../../src/runtime/docker/docker-labels.ts';
import { type PlatformOptions, type RunningPlatform, startPlatform } from '../../src/server/platform.ts';

export interface TestPlatform extends RunningPlatform {
  dataDir: string;
  /** Connection options for the e2b SDK: API and envd traffic both go to the platform origin. */
  sdk: { apiKey: string; apiUrl: string; sandboxUrl: string };
  /** Closes the platform, kills its sandboxes, removes anything else carrying its label and deletes its data. */
  dispose(): Promise<void>;
}

/** Starts the real platform in this process on a free loopback port with a fresh data directory. */
export async function startTestPlatform(
  overrides: Partial<Config> = {},
  dataDir = mkdtempSync(join(tmpdir(), 'tidepool-api-')),
  options: PlatformOptions = {},
): Promise<TestPlatform> {
  await ensureBaseImage();
  // Replicas of one database share the secrets key (the token seed is derived from it), as a deployment's must.
  const shared = overrides.databaseUrl && overrides.secretsKey === undefined ? { secretsKey: replicaSecretsKey(overrides.databaseUrl) } : {};
  // No desktop template unless a suite asks for it: a platform without the desktop image builds it in the background,
  // and every suite of a run doing that at once on a shared machine costs minutes of CPU nobody needs.
  const platform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'silent', sandboxNetwork: 'tidepool-test', warmPool: {}, warmPoolAdaptive: false, desktopImage: '', ...shared, ...overrides }, options);
  return Object.assign(platform, {
    dataDir,
    sdk: { apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url },
    async dispose() {
      await platform.close().catch(() => undefined);
      await removeLabelled(platform.platformId);
      removeTree(dataDir);
    },
  });
}

/** The secrets key every test replica of one database uses (base64 of 32 bytes): replicas must share it. */
export function replicaSecretsKey(databaseUrl: string): string {
  return createHash('sha256').update(`tidepool test replicas of ${databaseUrl}`).digest('base64');
}

export async function api(platform: RunningPlatform, method: string, path: string, body?: unknown, key = platform.apiKey): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(`${platform.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // plain text body
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

/** Safety net for failed tests: every container and image (paused, snapshot, build, cache layer) of one platform, by label. */
export async function removeLabelled(platformId: string): Promise<void> {
  const docker = new Docker();
  const filters = { label: [`${PLATFORM_LABEL}=${platformId}`] };
  for (const container of await docker.listContainers({ all: true, filters })) {
    await docker.getContainer(container.Id).remove({ force: true }).catch(() => undefined);
  }
  // Newest first, so images built on others go before their parents; names first, then what is left by id.
  const images = (await docker.listImages({ filters })).sort((a, b) => b.Created - a.Created);
  for (const image of images) {
    for (const tag of image.RepoTags ?? []) if (tag !== '<none>:<none>') await docker.getImage(tag).remove().catch(() => undefined);
    await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  }
}

/** A team made with the admin key, with one API key of its own and the SDK options that use it. */
export interface TeamHandle {
  teamID: string;
  key: string;
  keyId: string;
  sdk: { apiKey: string; apiUrl: string; sandboxUrl: string };
}

/** Makes team `name` and a key for it through the admin routes (the platform must know its admin key). */
export async function makeTeam(platform: RunningPlatform, name: string): Promise<TeamHandle> {
  const team = await api(platform, 'POST', '/admin/teams', { name }, platform.adminKey);
  if (team.status !== 201) throw new Error(`POST /admin/teams answered ${team.status}: ${JSON.stringify(team.body)}`);
  const key = await api(platform, 'POST', `/admin/teams/${team.body.teamID}/api-keys`, { name: `${name}-key` }, platform.adminKey);
  if (key.status !== 201) throw new Error(`POST /admin/teams/${team.body.teamID}/api-keys answered ${key.status}: ${JSON.stringify(key.body)}`);
  return { teamID: team.body.teamID, key: key.body.key, keyId: key.body.id, sdk: { apiKey: key.body.key, apiUrl: platform.url, sandboxUrl: platform.url } };
}

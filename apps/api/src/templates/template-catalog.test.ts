import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { TemplateCatalog } from './template-catalog.ts';
import { BASE_DEFAULTS } from './template-model.ts';
import { TemplateStore } from './template-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'tidepool-catalog-'));
let db: SqliteDatabase;
let catalog: TemplateCatalog;
const squatter = 'team-squatter';
const other = 'team-other';
let squattedId: string;

/** A template of `teamId` named `name` with one ready build. */
async function readyTemplate(teamId: string, name: string, isPublic: boolean): Promise<string> {
  const { build } = await catalog.registerBuild({ teamId, name, cpuCount: 1, memoryMB: 128 });
  await catalog.markReady(build, { image: `tidepool/template:${build.templateId}`, envdVersion: '1', defaults: BASE_DEFAULTS, images: [] });
  if (isPublic) await catalog.setPublic(build.templateId, true, teamId);
  return build.templateId;
}

beforeAll(async () => {
  db = SqliteDatabase.open(dir);
  catalog = new TemplateCatalog(new TemplateStore(db));
  await catalog.registerBase('tidepool/base:latest', '1');
  squattedId = await readyTemplate(squatter, 'desktop-app', true);
  await readyTemplate(squatter, 'private-one', false);
});

afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('template names across teams', () => {
  it("does not resolve another team's public template by its bare name", async () => {
    await expect(catalog.resolve('desktop-app', other)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(catalog.resolve('desktop-app:default', other)).rejects.toMatchObject({ kind: 'not_found' });
    expect(await catalog.find('desktop-app', other, 'use')).toBeUndefined();
  });

  it("resolves another team's public template by its id or as `<teamID>/name`, never a private one", async () => {
    expect((await catalog.resolve(squattedId, other)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/desktop-app`, other)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/desktop-app:default`, other)).template.templateId).toBe(squattedId);
    await expect(catalog.resolve(`${squatter}/private-one`, other)).rejects.toMatchObject({ kind: 'not_found' });
    // A namespace that is not the owner's names nothing, by name or by id.
    await expect(catalog.resolve(`${other}/desktop-app`, other)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(catalog.resolve(`${other}/${squattedId}`, other)).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('resolves a bare name to the caller’s own template and to the built-ins', async () => {
    expect((await catalog.resolve('desktop-app', squatter)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/private-one`, squatter)).template.alias).toBe('private-one');
    expect((await catalog.resolve('base', other)).template.templateId).toBe('base');
    expect((await catalog.find('base', other, 'read'))?.templateId).toBe('base');
  });
});

describe('a built-in template whose image is being built (desktop)', () => {
  const input = { templateId: 'desktop', alias: 'desktop', image: 'tidepool/desktop:latest', envdVersion: '1', defaults: BASE_DEFAULTS, cpuCount: 2, memoryMB: 2048 };

  it('a create waits for the build this process runs, then starts from its image', async () => {
    await catalog.registerBuiltinBuilding(input, 'building');
    let finish!: () => void;
    const build = new Promise<void>((resolve) => (finish = resolve)).then(() => catalog.registerBuiltin(input));
    catalog.awaitBuiltinBuild('desktop', build);
    let resolved: string | undefined;
    const waiting = catalog.resolve('desktop', other).then((r) => (resolved = r.build.image ?? 'none'));
    await new Promise((r) => setTimeout(r, 50));
    expect(resolved).toBeUndefined();
    finish();
    await waiting;
    expect(resolved).toBe('tidepool/desktop:latest');
    expect((await catalog.resolve('desktop', squatter)).build.status).toBe('ready');
  });

  it('a failed build: the create answers 404 with the reason; without a build in this process, 404 saying so', async () => {
    await catalog.registerBuiltinBuilding(input, 'building');
    const build = Promise.reject(new Error('apt-get failed')).catch(async () => {
      await catalog.withdrawBuiltin('desktop', 'building its image failed: apt-get failed');
    });
    catalog.awaitBuiltinBuild('desktop', build);
    await expect(catalog.resolve('desktop', other)).rejects.toMatchObject({ kind: 'not_found', message: expect.stringMatching(/building its image failed: apt-get failed/) });
    await catalog.registerBuiltinBuilding(input, 'building');
    await expect(catalog.resolve('desktop', other)).rejects.toMatchObject({ kind: 'not_found', message: expect.stringMatching(/being built by another API process/) });
  });

  it('its name is the platform\'s: no team builds or snapshots over it', async () => {
    await expect(catalog.registerBuild({ teamId: other, name: 'desktop', cpuCount: 1, memoryMB: 128 })).rejects.toMatchObject({ kind: 'invalid' });
  });
});

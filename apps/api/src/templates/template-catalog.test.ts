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
  squattedId = await readyTemplate(squatter, 'desktop', true);
  await readyTemplate(squatter, 'private-one', false);
});

afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('template names across teams', () => {
  it("does not resolve another team's public template by its bare name", async () => {
    await expect(catalog.resolve('desktop', other)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(catalog.resolve('desktop:default', other)).rejects.toMatchObject({ kind: 'not_found' });
    expect(await catalog.find('desktop', other, 'use')).toBeUndefined();
  });

  it("resolves another team's public template by its id or as `<teamID>/name`, never a private one", async () => {
    expect((await catalog.resolve(squattedId, other)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/desktop`, other)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/desktop:default`, other)).template.templateId).toBe(squattedId);
    await expect(catalog.resolve(`${squatter}/private-one`, other)).rejects.toMatchObject({ kind: 'not_found' });
    // A namespace that is not the owner's names nothing, by name or by id.
    await expect(catalog.resolve(`${other}/desktop`, other)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(catalog.resolve(`${other}/${squattedId}`, other)).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('resolves a bare name to the caller’s own template and to the built-ins', async () => {
    expect((await catalog.resolve('desktop', squatter)).template.templateId).toBe(squattedId);
    expect((await catalog.resolve(`${squatter}/private-one`, squatter)).template.alias).toBe('private-one');
    expect((await catalog.resolve('base', other)).template.templateId).toBe('base');
    expect((await catalog.find('base', other, 'read'))?.templateId).toBe('base');
  });
});

// The dashboard's administration page and team scoping in headless Chromium (puppeteer-core) against the real
// platform: a team key is refused on the admin sign-in; the admin key creates a team and a key (shown once, masked in
// the list afterwards); signing in with that key shows none of the default team's sandboxes, and a sandbox of the new
// team appears; revoking the key from the page signs that tab out at its next refresh.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureChromium } from './support/chromium.ts';
import { clickWhenPresent } from './support/page-actions.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = randomBytes(3).toString('hex');

let chromium: string | undefined;
let platform: TestPlatform;
let browser: Browser;
let page: Page;
const created: Array<{ id: string; key: string }> = [];

async function createSandbox(key: string): Promise<string> {
  const response = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 600 }, key);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  created.push({ id: response.body.sandboxID, key });
  return response.body.sandboxID as string;
}

async function waitForText(selector: string, pattern: RegExp, timeout = 20_000): Promise<string> {
  await page.waitForFunction(
    (sel: string, source: string, flags: string) => [...document.querySelectorAll(sel)].some((el) => new RegExp(source, flags).test(el.textContent ?? '')),
    { timeout, polling: 100 },
    selector,
    pattern.source,
    pattern.flags,
  );
  return page.$$eval(selector, (els) => els.map((el) => el.textContent ?? '').join('\n'));
}

describe('dashboard administration and team scoping in a browser', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    chromium = await ensureChromium();
    await exec('node', [join(REPO, 'apps/dashboard/scripts/build.mjs')], { cwd: REPO, timeout: 120_000 });
    platform = await startTestPlatform();
    if (!chromium) return;
    browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'] });
    page = await browser.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
  }, 900_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    for (const { id, key } of created) await api(platform, 'DELETE', `/sandboxes/${id}`, undefined, key).catch(() => undefined);
    await platform?.dispose();
  }, 120_000);

  beforeEach((context) => {
    if (!chromium) {
      process.stderr.write('SKIPPED: the dashboard browser tests need Chromium (apt-get install chromium)\n');
      context.skip();
    }
  });

  it('admin page: refuses a team key, then creates a team and a key shown once; the team key sees only its team', async () => {
    const defaultSandbox = await createSandbox(platform.apiKey);
    await page.goto(`${platform.url}/dashboard/#/admin`);
    await page.waitForSelector('#admin-key');
    await page.type('#admin-key', platform.apiKey);
    await page.keyboard.press('Enter');
    await waitForText('.signin .notice.error', /did not accept this admin key/);

    await page.$eval('#admin-key', (el) => {
      (el as HTMLInputElement).value = '';
    });
    await page.type('#admin-key', platform.adminKey);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#new-team');
    await waitForText('section.team h2', /default/);
    await page.type('#new-team', `research-${run}`);
    await page.keyboard.press('Enter');
    await waitForText('section.team h2', new RegExp(`research-${run}`));
    const teams = (await api(platform, 'GET', '/admin/teams', undefined, platform.adminKey)).body as Array<{ teamID: string; name: string }>;
    const team = teams.find((t) => t.name === `research-${run}`)!;
    expect(team).toBeDefined();

    const section = `section.team[data-team="${team.teamID}"]`;
    await page.type(`${section} input[name="key-name"]`, 'laptop');
    await clickWhenPresent(page, `${section} form button[type="submit"]`);
    await page.waitForSelector(`${section} code.new-key`);
    const key = await page.$eval(`${section} code.new-key`, (el) => el.textContent ?? '');
    expect(key).toMatch(/^e2b_[0-9a-f]{40}$/);
    const row = await waitForText(`${section} tbody tr`, /laptop/);
    expect(row).toContain(`${key.slice(0, 8)}…${key.slice(-4)}`);
    expect(row).not.toContain(key);

    // Signed in with the new team's key, the dashboard lists that team's sandboxes only.
    const teamSandbox = await createSandbox(key);
    await page.goto(`${platform.url}/dashboard/#/sandboxes`);
    await page.waitForSelector('#api-key');
    await page.type('#api-key', key);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`tr[data-sandbox="${teamSandbox}"]`, { timeout: 20_000 });
    await waitForText('.top .team-name', new RegExp(`^Team: research-${run}$`));
    expect(await page.$(`tr[data-sandbox="${defaultSandbox}"]`)).toBeNull();
    await page.goto(`${platform.url}/dashboard/#/sandboxes/${defaultSandbox}`);
    // Another team's sandbox looks exactly like a missing one.
    await waitForText('main .notice.error', /This sandbox no longer exists/);

    // Revoked from the admin page (admin key still in this tab's session), the team key's tab is signed out.
    await page.goto(`${platform.url}/dashboard/#/admin`);
    await clickWhenPresent(page, `${section} tbody tr button.danger`);
    await page.waitForFunction((sel: string) => document.querySelector(`${sel} tbody tr`) === null, { timeout: 15_000 }, section);
    expect((await api(platform, 'GET', '/v2/sandboxes', undefined, key)).status).toBe(401);
    await page.goto(`${platform.url}/dashboard/#/sandboxes`);
    await waitForText('.signin .notice.error', /no longer accepts this key/);
    await api(platform, 'DELETE', `/sandboxes/${teamSandbox}`, undefined, platform.apiKey).then((r) => expect(r.status).toBe(404));
  });
});

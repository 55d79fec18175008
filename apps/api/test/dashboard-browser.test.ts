// The dashboard in a real browser: headless Chromium (Debian's `chromium`, installed here when missing) driven by
// puppeteer-core against the real platform and real sandboxes. Sign-in, the sandbox list, a live terminal over
// envd's PTY through the platform proxy (typing, resize, re-attach after a reload), files, kill from the UI and a
// template build's log streaming in. Screenshots of failed cases go to a temporary directory printed on stderr.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureChromium } from './support/chromium.ts';
import { clickWhenPresent as clickIn } from './support/page-actions.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const REPO = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const SHOTS = mkdtempSync(join(tmpdir(), 'tidepool-dashboard-shots-'));

/** A raw request (custom Host, unnormalised path) to the platform. */
function rawRequest(platform: TestPlatform, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const url = new URL(platform.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

let chromium: string | undefined;
let platform: TestPlatform;
let browser: Browser;
let page: Page;
let sandboxId = '';
const created: string[] = [];
const pageErrors: string[] = [];

async function createSandbox(metadata: Record<string, string>): Promise<string> {
  const response = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 900, metadata });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  created.push(response.body.sandboxID);
  return response.body.sandboxID as string;
}

/** What the terminal shows: xterm's DOM renderer rows, one line each. */
function screenText(): Promise<string> {
  return page.evaluate(() => [...document.querySelectorAll('.xterm-rows > div')].map((row) => (row.textContent ?? '').replace(/\u00a0/g, ' ').trimEnd()).join('\n'));
}

async function waitForScreen(pattern: RegExp, timeout = 20_000): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeout;
  let text = '';
  while (Date.now() < deadline) {
    text = await screenText();
    const match = text.match(pattern);
    if (match) return match;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`the terminal never showed ${pattern}; it shows:\n${text}`);
}

async function typeLine(line: string): Promise<void> {
  await page.focus('.terminal-screen textarea');
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

async function terminalStatus(): Promise<string> {
  return page.$eval('.terminal-status', (el) => el.textContent ?? '');
}

const clickWhenPresent = (selector: string, timeout?: number): Promise<void> => clickIn(page, selector, timeout);

async function waitForText(selector: string, pattern: RegExp, timeout = 20_000): Promise<string> {
  await page.waitForFunction(
    (sel: string, source: string, flags: string) => {
      const el = document.querySelector(sel);
      return el !== null && new RegExp(source, flags).test(el.textContent ?? '');
    },
    { timeout, polling: 100 },
    selector,
    pattern.source,
    pattern.flags,
  );
  return page.$eval(selector, (el) => el.textContent ?? '');
}

describe('dashboard in a browser', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    chromium = await ensureChromium();
    // The API serves apps/dashboard/dist: build it from the current sources.
    await exec('node', [join(REPO, 'apps/dashboard/scripts/build.mjs')], { cwd: REPO, timeout: 120_000 });
    platform = await startTestPlatform();
    sandboxId = await createSandbox({ suite: 'dashboard', run: randomBytes(3).toString('hex') });
    if (!chromium) return;
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--no-default-browser-check'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 860 });
    page.on('dialog', (dialog) => void dialog.accept());
    // Script errors and CSP refusals ("Refused to …"); failed fetches (the wrong key's 401) are expected and left out.
    page.on('pageerror', (err) => pageErrors.push(`pageerror: ${err instanceof Error ? err.message : String(err)}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) pageErrors.push(`console: ${message.text()}`);
    });
  }, 900_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    for (const id of created) await api(platform, 'DELETE', `/sandboxes/${id}`).catch(() => undefined);
    await platform?.dispose();
    if (readdirSync(SHOTS).length === 0) rmSync(SHOTS, { recursive: true, force: true });
  }, 120_000);

  beforeEach((context) => {
    if (!chromium) {
      process.stderr.write('SKIPPED: the dashboard browser tests need Chromium (apt-get install chromium), which is not installed and could not be installed\n');
      context.skip();
    }
    context.onTestFailed(async () => {
      const file = join(SHOTS, `${context.task.name.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 80)}.png`);
      try {
        await page.screenshot({ path: file as `${string}.png`, fullPage: true });
        process.stderr.write(`dashboard-browser: screenshot of the failed case "${context.task.name}": ${file}\n`);
      } catch (err) {
        process.stderr.write(`dashboard-browser: no screenshot for "${context.task.name}": ${(err as Error).message}\n`);
      }
    });
  });

  it('serves /dashboard as public static files; the API behind it still needs the key; sandbox hosts and routing headers never get it', async () => {
    const index = await fetch(`${platform.url}/dashboard/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    const html = await index.text();
    expect(html).toContain('<script type="module" src="app.js">');
    expect(html).not.toContain(platform.apiKey);
    const script = await fetch(`${platform.url}/dashboard/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(await script.text()).not.toContain(platform.apiKey);
    expect((await fetch(`${platform.url}/dashboard/xterm.css`)).status).toBe(200);
    const bare = await fetch(`${platform.url}/dashboard`, { redirect: 'manual' });
    expect([bare.status, bare.headers.get('location')]).toEqual([302, '/dashboard/']);
    expect((await fetch(`${platform.url}/dashboard/nope.js`)).status).toBe(404);

    // Only GET/HEAD of the files is open; the REST API is not reachable through the prefix.
    expect((await rawRequest(platform, '/dashboard/../v2/sandboxes')).status).toBe(404);
    expect((await rawRequest(platform, '/dashboard/%2e%2e/v2/sandboxes')).status).toBe(404);
    expect((await rawRequest(platform, '/dashboard/', {}, 'POST')).status).toBe(401);
    expect((await rawRequest(platform, '/v2/sandboxes')).status).toBe(401);

    // A sandbox's host is the sandbox's, whatever the path: the request goes to envd (or a proxy error), never the page.
    for (const host of [`49983-${sandboxId}.${platform.domain}`, `8000-nosuchsandbox.${platform.domain}`]) {
      const viaHost = await rawRequest(platform, '/dashboard/', { host });
      expect(viaHost.body, host).not.toContain('app.js');
      expect(viaHost.headers['content-security-policy'], host).toBeUndefined();
    }
    const viaHeaders = await rawRequest(platform, '/dashboard/', { 'e2b-sandbox-id': sandboxId, 'e2b-sandbox-port': '49983' });
    expect(viaHeaders.body).not.toContain('app.js');
    expect(viaHeaders.headers['content-security-policy']).toBeUndefined();
  });

  it('signs in: a wrong key gets a clear message, the right key shows the sandbox list with state, template and metadata', async () => {
    await page.goto(`${platform.url}/dashboard/`);
    await page.waitForSelector('#api-key');
    await page.type('#api-key', 'e2b_0000000000000000000000000000000000000000');
    await page.keyboard.press('Enter');
    const message = await waitForText('.signin .notice.error', /did not accept this API key/);
    expect(message).toMatch(/Invalid API key/);

    await page.$eval('#api-key', (el) => {
      (el as HTMLInputElement).value = '';
    });
    await page.type('#api-key', platform.apiKey);
    await page.keyboard.press('Enter');
    const row = `tr[data-sandbox="${sandboxId}"]`;
    await page.waitForSelector(row, { timeout: 20_000 });
    const text = await page.$eval(row, (el) => el.textContent ?? '');
    expect(text).toContain('running');
    expect(text).toContain('base');
    expect(text).toContain('suite=dashboard');
    expect(await page.evaluate(() => sessionStorage.getItem('tidepool.apiKey'))).toBe(platform.apiKey);

    // The live refresh picks up a sandbox created elsewhere.
    const other = await createSandbox({ suite: 'dashboard', second: 'yes' });
    await page.waitForSelector(`tr[data-sandbox="${other}"]`, { timeout: 15_000 });
    // The metadata filter narrows the list.
    await page.type('#filter-metadata', 'second=yes');
    await page.waitForFunction((id: string) => document.querySelector(`tr[data-sandbox="${id}"]`) === null, { timeout: 15_000 }, sandboxId);
    expect(await page.$(`tr[data-sandbox="${other}"]`)).not.toBeNull();
    await page.$eval('#filter-metadata', (el) => {
      (el as HTMLInputElement).value = '';
      el.dispatchEvent(new Event('input'));
    });
    await page.waitForSelector(row, { timeout: 15_000 });
  });

  it('opens a terminal: echo hi-$RANDOM comes back expanded on the screen', async () => {
    await clickWhenPresent(`a[href="#/sandboxes/${sandboxId}"]`);
    await page.waitForSelector('a[data-tab="terminal"]');
    await clickWhenPresent('a[data-tab="terminal"]');
    await page.waitForSelector('.terminal-screen textarea', { timeout: 20_000 });
    await waitForText('.terminal-status', /Shell started \(pid \d+\)/);
    await waitForScreen(/\$ ?$/m);
    await typeLine('echo hi-$RANDOM');
    const [line] = await waitForScreen(/^hi-\d+$/m);
    expect(line).toMatch(/^hi-\d+$/);
    // Keyboard: Tab belongs to the shell, F6 leaves the terminal.
    await page.keyboard.press('F6');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('New shell');
  });

  it('resizing the window resizes the PTY (stty size follows the screen)', async () => {
    const rowsOnScreen = () => page.$$eval('.xterm-rows > div', (rows) => rows.length);
    await typeLine('echo "before-$(stty size)-end"');
    const [, rows1, cols1] = await waitForScreen(/before-(\d+) (\d+)-end/);
    expect(Number(rows1)).toBe(await rowsOnScreen());

    await page.setViewport({ width: 820, height: 620 });
    await page.waitForFunction((rows: number) => document.querySelectorAll('.xterm-rows > div').length < rows, { timeout: 10_000 }, Number(rows1));
    // The Update RPC follows the fit: ask the PTY until it reports the new size (a few tries).
    let rows2 = rows1;
    let cols2 = cols1;
    for (let attempt = 1; attempt <= 5 && Number(rows2) >= Number(rows1); attempt++) {
      await new Promise((r) => setTimeout(r, 300));
      await typeLine(`clear; echo "after${attempt}-$(stty size)-end"`);
      [, rows2, cols2] = await waitForScreen(new RegExp(`after${attempt}-(\\d+) (\\d+)-end`));
    }
    expect(Number(rows2)).toBeLessThan(Number(rows1));
    expect(Number(cols2)).toBeLessThan(Number(cols1));
    expect(Number(rows2)).toBe(await rowsOnScreen());
    await page.setViewport({ width: 1280, height: 860 });
  });

  it('a reload re-attaches to the same shell: a variable set before it is still set', async () => {
    const mark = `mark${randomBytes(4).toString('hex')}`;
    await typeLine(`export DASH_MARK=${mark}; echo "set-$DASH_MARK"`);
    // Everything typed has reached the shell before the reload.
    await waitForScreen(new RegExp(`^set-${mark}$`, 'm'));
    const pid = await page.evaluate((id: string) => sessionStorage.getItem(`tidepool.pty.${id}`), sandboxId);
    expect(pid).toMatch(/^\d+$/);
    await page.reload();
    await waitForText('.terminal-status', /Re-attached to the shell \(pid \d+\)/);
    expect(await terminalStatus()).toContain(`pid ${pid})`);
    await typeLine('echo "got-$DASH_MARK-$$"');
    const [, got, shellPid] = await waitForScreen(/got-(mark[0-9a-f]+)-(\d+)/);
    expect(got).toBe(mark);
    expect(shellPid).toBe(pid);
  });

  it('files: lists the home directory, uploads a file into it and downloads it back', async () => {
    const local = mkdtempSync(join(tmpdir(), 'tidepool-dashboard-files-'));
    try {
      const content = `uploaded-${randomBytes(6).toString('hex')}\n`;
      writeFileSync(join(local, 'dash-upload.txt'), content);
      await clickWhenPresent('a[data-tab="files"]');
      await page.waitForSelector('tr[data-path="/home/user/.bashrc"], tr[data-path="/home/user/.profile"]', { timeout: 20_000 });
      const input = await page.waitForSelector('#files-upload');
      await (input as unknown as { uploadFile(...paths: string[]): Promise<void> }).uploadFile(join(local, 'dash-upload.txt'));
      await page.waitForSelector('tr[data-path="/home/user/dash-upload.txt"]', { timeout: 20_000 });

      // In the sandbox, as the sandbox user: read back through envd /files with the token from GET /sandboxes/{id}.
      const detail = await api(platform, 'GET', `/sandboxes/${sandboxId}`);
      expect(typeof detail.body.envdAccessToken).toBe('string');
      const read = await fetch(`${platform.url}/files?path=/home/user/dash-upload.txt&username=user`, {
        headers: { 'e2b-sandbox-id': sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': detail.body.envdAccessToken },
      });
      expect(await read.text()).toBe(content);

      const downloads = join(local, 'downloads');
      mkdirSync(downloads);
      const cdp = await page.createCDPSession();
      await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
      await clickWhenPresent('tr[data-path="/home/user/dash-upload.txt"] button');
      await waitForText('.files .status-line', /Downloaded \/home\/user\/dash-upload.txt/);
      const deadline = Date.now() + 10_000;
      let downloaded = '';
      while (Date.now() < deadline && downloaded !== content) {
        downloaded = await Promise.resolve()
          .then(() => readFileSync(join(downloads, 'dash-upload.txt'), 'utf8'))
          .catch(() => '');
        if (downloaded !== content) await new Promise((r) => setTimeout(r, 200));
      }
      expect(downloaded).toBe(content);
    } finally {
      rmSync(local, { recursive: true, force: true });
    }
  });

  it('shows metrics charts and lifecycle events on the overview', async () => {
    await clickWhenPresent('a[data-tab="overview"]');
    await waitForText('.overview .events', /\S/);
    await page.waitForSelector('.charts figure svg, .charts .notice', { timeout: 20_000 });
    // The platform samples every few seconds: charts appear once a sample exists.
    await page.waitForSelector('.charts figure svg polyline', { timeout: 30_000 });
    const captions = await page.$$eval('.charts figcaption', (els) => els.map((el) => el.textContent ?? ''));
    expect(captions.join(' | ')).toMatch(/CPU: [\d.]+ %.*Memory: .*Disk: /);
  });

  it('creates a sandbox from a template with the form, then extends, snapshots, pauses and resumes it from its row', async () => {
    await clickWhenPresent('a[href="#/sandboxes"]');
    await page.waitForSelector('#create-template');
    const made = `ui${randomBytes(3).toString('hex')}`;
    await page.$eval('#create-timeout', (el) => {
      (el as HTMLInputElement).value = '';
    });
    await page.type('#create-timeout', '240');
    await page.type('#create-metadata', `made=${made}`);
    await clickWhenPresent('.create-form button[type="submit"]');
    const createdText = await waitForText('.status-line', /Created \w+/, 60_000);
    const id = /Created (\w+)/.exec(createdText)?.[1] ?? '';
    created.push(id);
    const row = `tr[data-sandbox="${id}"]`;
    await page.waitForSelector(row, { timeout: 15_000 });
    expect(await page.$eval(row, (el) => el.textContent ?? '')).toContain(`made=${made}`);
    const before = await api(platform, 'GET', `/sandboxes/${id}`);
    expect(before.body).toMatchObject({ templateID: 'base', state: 'running', metadata: { made } });

    await clickWhenPresent(`button[data-action="extend"][data-sandbox="${id}"]`);
    await waitForText('.status-line', new RegExp(`${id} now ends in`));
    const extended = await api(platform, 'GET', `/sandboxes/${id}`);
    expect(Date.parse(extended.body.endAt) - Date.parse(before.body.endAt)).toBeGreaterThan(500_000);

    await clickWhenPresent(`button[data-action="snapshot"][data-sandbox="${id}"]:not([disabled])`, 30_000);
    const snapshotText = await waitForText('.status-line', /Snapshot \S+ taken/, 120_000);
    const snapshots = await api(platform, 'GET', `/snapshots?sandboxID=${id}`);
    expect(snapshots.body.map((s: { snapshotID: string }) => s.snapshotID)).toContain(/Snapshot (\S+) taken/.exec(snapshotText)?.[1]);

    await clickWhenPresent(`button[data-action="pause"][data-sandbox="${id}"]:not([disabled])`, 30_000);
    await page.waitForSelector(`${row}[data-state="paused"]`, { timeout: 60_000 });
    expect((await api(platform, 'GET', `/sandboxes/${id}`)).body.state).toBe('paused');

    await clickWhenPresent(`button[data-action="resume"][data-sandbox="${id}"]`);
    await page.waitForSelector(`${row}[data-state="running"]`, { timeout: 60_000 });
    expect((await api(platform, 'GET', `/sandboxes/${id}`)).body.state).toBe('running');
  }, 300_000);

  it('kills the sandbox from the UI: it is gone from the list and from the REST API', async () => {
    await clickWhenPresent('a[href="#/templates"]');
    await clickWhenPresent('a[href="#/sandboxes"]');
    const kill = `button[data-action="kill"][data-sandbox="${sandboxId}"]`;
    await clickWhenPresent(kill);
    await page.waitForFunction((id: string) => document.querySelector(`tr[data-sandbox="${id}"]`) === null, { timeout: 30_000 }, sandboxId);
    await waitForText('.status-line', new RegExp(`Killed ${sandboxId}`));
    expect((await api(platform, 'GET', `/sandboxes/${sandboxId}`)).status).toBe(404);
  });

  it("streams a template build's log lines while it runs", async () => {
    const name = `dash-build-${randomBytes(3).toString('hex')}`;
    const registered = await api(platform, 'POST', '/v3/templates', { name, cpuCount: 1, memoryMB: 512 });
    expect(registered.status, JSON.stringify(registered.body)).toBe(202);
    const { templateID, buildID } = registered.body as { templateID: string; buildID: string };
    const started = await api(platform, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, {
      fromTemplate: 'base',
      // A command of its own each run, so no layer cache can answer it without running it.
      steps: [{ type: 'RUN', args: [`echo ${name}; for i in 1 2 3 4; do echo dash-line-$i; sleep 2; done`] }],
    });
    expect(started.status, JSON.stringify(started.body)).toBe(202);

    await clickWhenPresent('a[href="#/templates"]');
    await page.waitForSelector(`a[href="#/templates/${templateID}"]`, { timeout: 15_000 });
    await clickWhenPresent(`a[href="#/templates/${templateID}"]`);
    await page.waitForSelector(`a[href="#/templates/${templateID}/builds/${buildID}"]`, { timeout: 15_000 });
    await clickWhenPresent(`a[href="#/templates/${templateID}/builds/${buildID}"]`);
    // A line is on screen while the build still runs, then the rest follow and the build ends ready.
    await waitForText('.build-log', /dash-line-1/, 180_000);
    const stateWhenFirstSeen = await page.$eval('h1 .build', (el) => el.textContent ?? '');
    expect(stateWhenFirstSeen).not.toBe('ready');
    await waitForText('.build-log', /dash-line-4/, 60_000);
    await waitForText('h1 .build', /^ready$/, 180_000);
  }, 420_000);

  it('runs code in a code-interpreter sandbox: print(1+1) streams 2, a matplotlib plot shows as an image, HTML stays in a sandboxed iframe, errors show their name', async () => {
    const response = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'code-interpreter-v1', timeout: 600, metadata: { suite: 'dashboard-run' } });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    const id = response.body.sandboxID as string;
    created.push(id);
    // A base sandbox has no interpreter: no tab, and its URL says why (a fresh one: earlier cases kill theirs).
    const plain = await createSandbox({ suite: 'dashboard-run-base' });
    await page.goto(`${platform.url}/dashboard/#/sandboxes/${plain}/run`);
    await waitForText('.tab-body', /needs a sandbox of the code-interpreter template/);
    expect(await page.$('a[data-tab="run"]')).toBeNull();

    await page.goto(`${platform.url}/dashboard/#/sandboxes/${id}`);
    await page.waitForSelector('a[data-tab="run"]', { timeout: 20_000 });
    await clickWhenPresent('a[data-tab="run"]');
    await page.waitForSelector('#run-code');
    const runCell = async (language: string, code: string): Promise<void> => {
      await page.select('#run-language', language);
      await page.$eval('#run-code', (el) => { (el as HTMLTextAreaElement).value = ''; });
      await page.type('#run-code', code);
      await clickWhenPresent('.run-button');
      await waitForText('.run-status', /Finished in \d+ ms|Run failed/, 60_000);
      expect(await page.$eval('.run-status', (el) => el.textContent ?? '')).toMatch(/^Finished/);
    };

    await runCell('python', 'print(1+1)');
    expect(await page.$eval('.run-output', (el) => el.textContent ?? '')).toBe('2\n');

    // Output shows while the code still runs, not at the end.
    await page.$eval('#run-code', (el) => { (el as HTMLTextAreaElement).value = ''; });
    await page.type('#run-code', 'import time\nprint("first", flush=True)\ntime.sleep(3)\nprint("second")');
    await clickWhenPresent('.run-button');
    await waitForText('.run-output', /first/, 15_000);
    expect(await page.$eval('.run-output', (el) => el.textContent ?? '')).not.toContain('second');
    expect(await page.$eval('.run-status', (el) => el.textContent ?? '')).not.toMatch(/Finished/);
    await waitForText('.run-status', /Finished/, 30_000);
    expect(await page.$eval('.run-output', (el) => el.textContent ?? '')).toBe('first\nsecond\n');

    await runCell('python', 'import matplotlib.pyplot as plt\nprint("plotting")\nplt.plot([1, 4, 2, 8], label="xs")\nplt.title("dashboard plot")\nplt.show()');
    await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('.run-output img.run-image')].some((img) => img.complete && img.naturalWidth > 100), { timeout: 15_000 });
    expect(await page.$eval('.run-output .run-stream', (el) => el.textContent ?? '')).toBe('plotting\n');
    expect(await page.$eval('.run-output img.run-image', (img) => (img as HTMLImageElement).src.slice(0, 22))).toBe('data:image/png;base64,');
    const shot = join(tmpdir(), 'tidepool-dashboard-run-code.png');
    await page.screenshot({ path: shot as `${string}.png`, fullPage: true });
    process.stderr.write(`dashboard-browser: the Run code tab with a plot: ${shot}\n`);

    // HTML from the sandbox: in an iframe with sandbox="" (own origin, no scripts), never in the dashboard's DOM.
    await runCell('python', 'from IPython.display import HTML\nHTML("<b id=\'from-sandbox\'>bold</b><script>parent.document.title=\'owned\'</script>")');
    await page.waitForSelector('.run-output iframe.run-html');
    expect(await page.$eval('.run-output iframe.run-html', (el) => el.getAttribute('sandbox'))).toBe('');
    expect(await page.$('#from-sandbox')).toBeNull();
    // Chromium reports the refused script; that report is the proof it did not run, so it is taken off the page errors.
    const isBlockedReport = (e: string): boolean => /Blocked script execution in 'about:srcdoc'.*sandboxed/.test(e);
    for (let waited = 0; waited < 5000 && !pageErrors.some(isBlockedReport); waited += 100) await new Promise((r) => setTimeout(r, 100));
    const blocked = pageErrors.findIndex(isBlockedReport);
    expect(blocked, pageErrors.join('\n')).toBeGreaterThanOrEqual(0);
    pageErrors.splice(blocked, 1);
    expect(await page.title()).not.toBe('owned');

    // A DataFrame is a table; state carries over between runs (pd from this cell, used in the next).
    await runCell('python', 'import pandas as pd\ndf = pd.DataFrame({"name": ["a", "b"], "n": [1, 2]})');
    await runCell('python', 'df');
    expect(await page.$$eval('.run-output .run-table thead th', (ths) => ths.map((th) => th.textContent))).toEqual(['', 'name', 'n']);
    expect(await page.$$eval('.run-output .run-table tbody tr', (trs) => trs.map((tr) => tr.textContent))).toEqual(['0a1', '1b2']);

    await runCell('python', 'undefined_name + 1');
    expect(await page.$eval('.run-error-title', (el) => el.textContent ?? '')).toBe("NameError: name 'undefined_name' is not defined");
    expect(await page.$eval('.run-error pre', (el) => el.textContent ?? '')).not.toMatch(/\u001b/);

    await runCell('javascript', 'console.log("from js"); [1, 2, 3].map((x) => x * 2)');
    expect(await page.$eval('.run-output', (el) => el.textContent ?? '')).toContain('from js');
    expect(await page.$eval('.run-output .run-result.main .run-text', (el) => el.textContent ?? '')).toBe('[ 2, 4, 6 ]');
  }, 240_000);

  it('ran without script errors or Content-Security-Policy refusals in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});

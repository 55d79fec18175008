/**
 * Template builds end to end through the published e2b SDK (`Template.build` and friends) against the real
 * platform: steps (RUN, COPY of a real directory with modes and symlinks, ENV, WORKDIR, USER), start and ready
 * commands, fromTemplate / fromBaseImage / fromImage, the layer cache, failures, and tags.
 *
 * Independent builds start together in beforeAll (each chain is awaited by its test), so the file costs
 * about as long as its slowest chain; the cache builds, whose durations are compared, run alone afterwards.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuildError, type BuildInfo, Sandbox, SandboxError, Template, TemplateError, type TemplateBuilder, type TemplateClass, waitForPort } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import {
  background,
  buildLogCollector,
  idsFromLogs,
  probe,
  rejectionOf,
  removeTemplatesAndSandboxes,
  settleWithin,
  until,
  viaProxy,
} from './support/template-testing.ts';

/** How long the builder retries a readyCmd before failing the build (the reference waits 10 minutes). */
const READY_TIMEOUT_SECONDS = 20;

const run = randomBytes(4).toString('hex');
const names = {
  full: `tp-full-${run}`,
  child: `tp-child-${run}`,
  fromBase: `tp-frombase-${run}`,
  debian: `tp-debian-${run}`,
  links: `tp-links-${run}`,
  cache: `tp-cache-${run}`,
  failing: `tp-failing-${run}`,
  noUser: `tp-nouser-${run}`,
  neverReady: `tp-neverready-${run}`,
  tags: `tp-tags-${run}`,
};

let platform: TestPlatform;
let ctx: string;
const chains: Record<string, Promise<any>> = {};

interface Built {
  info: BuildInfo;
  logs: string[];
  ms: number;
}

async function build(template: TemplateClass, name: string, extra: { skipCache?: boolean; tags?: string[] } = {}): Promise<Built> {
  const logs = buildLogCollector();
  const started = Date.now();
  const info = await Template.build(template, name, { ...platform.sdk, onBuildLogs: logs.onBuildLogs, ...extra });
  return { info, logs: logs.lines, ms: Date.now() - started };
}

/** Builds a template that must fail; returns the error, the logs and the IDs of the failed build. */
async function failedBuild(template: TemplateClass, name: string) {
  const logs = buildLogCollector();
  const started = Date.now();
  const error = await rejectionOf(Template.build(template, name, { ...platform.sdk, onBuildLogs: logs.onBuildLogs }));
  return { error, logs: logs.lines, ms: Date.now() - started, ...idsFromLogs(logs.lines) };
}

async function withSandbox<T>(template: string, fn: (sbx: Sandbox) => Promise<T>, opts: { envs?: Record<string, string> } = {}): Promise<T> {
  const sbx = await Sandbox.create(template, { ...platform.sdk, timeoutMs: 300_000, ...opts });
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => undefined);
  }
}

/** A build context directory: files with several modes, a nested directory, a relative symlink, a glob match. */
function makeContext(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-template-ctx-'));
  const file = (path: string, content: string, mode: number) => {
    writeFileSync(join(dir, path), content);
    chmodSync(join(dir, path), mode);
  };
  mkdirSync(join(dir, 'app', 'nested'), { recursive: true });
  file('app/hello.txt', `hello from copy ${run}\n`, 0o644);
  file('app/run.sh', '#!/bin/sh\necho script-ran\n', 0o755);
  file('app/secret.txt', 'only for the owner\n', 0o600);
  file('app/nested/deep.txt', 'deep\n', 0o644);
  symlinkSync('hello.txt', join(dir, 'app', 'link.txt'));
  file('single.txt', `single ${run}\n`, 0o644);
  file('a.cfg', 'a=1\n', 0o644);
  file('b.cfg', 'b=2\n', 0o644);
  // The SDK's own symlink cases (template build.test.ts): relative, absolute (a host path: dangling in the
  // sandbox, and one that exists there), dangling, and one climbing out of the context.
  mkdirSync(join(dir, 'folder'));
  file('folder/test.txt', 'This is a test file.', 0o644);
  symlinkSync('test.txt', join(dir, 'folder', 'symlink.txt'));
  symlinkSync(join(dir, 'folder', 'test.txt'), join(dir, 'folder', 'symlink2.txt'));
  symlinkSync('/etc/hostname', join(dir, 'folder', 'absolute.txt'));
  symlinkSync('12345test.txt', join(dir, 'folder', 'symlink3.txt'));
  symlinkSync('../../outside', join(dir, 'folder', 'up'));
  return dir;
}

// --- the chains, started in beforeAll -------------------------------------------------------------------

/** Every step type, a start command with a port readiness check, and the sandbox defaults it leaves behind. */
function fullTemplate(): TemplateClass {
  return Template({ fileContextPath: ctx })
    .fromTemplate('base')
    .runCmd(['useradd --create-home --shell /bin/bash tpuser', 'mkdir -p /opt/tp /srv/work', 'chown tpuser /srv/work', 'echo "built-by-$(whoami)" > /opt/tp/run.txt'], { user: 'root' })
    .runCmd(`whoami > /home/user/default-run-user.txt && echo ${run} > /home/user/run-id.txt`)
    .copy('app', '/opt/app')
    .copy('single.txt', '/opt/single/', { mode: 0o640 })
    .copy('single.txt', '/opt/owned.txt', { user: 'user' })
    .copy('app/link.txt', '/opt/resolved/', { resolveSymlinks: true })
    .copy('*.cfg', '/opt/cfg/')
    .setEnvs({ TP_GREETING: 'hello env', TP_SPACED: 'a  b c', TP_OVERRIDE: 'from-template' })
    .runCmd('echo "$TP_GREETING" > /opt/tp/env-at-build.txt', { user: 'root' })
    .setWorkdir('/srv/work')
    .setUser('tpuser')
    .runCmd('whoami > build-user.txt && pwd > build-pwd.txt && echo served-from-workdir > index.txt')
    .copy('single.txt', 'rel/')
    .setStartCmd('python3 -m http.server 8123 --bind 0.0.0.0', waitForPort(8123));
}

async function fullChain() {
  const full = await build(fullTemplate(), names.full);
  const child = await build(
    Template()
      .fromTemplate(names.full)
      .runCmd('cat /opt/tp/run.txt > /opt/tp/child.txt', { user: 'root' })
      .runCmd('echo "child-$(whoami)" > child-user.txt'),
    names.child,
  );
  return { full, child };
}

const cacheTemplate = (skipBeforeCopy = false) => {
  const start = Template({ fileContextPath: ctx }).fromTemplate('base').runCmd(`sleep 5 && echo "${run}-$(date +%s%N)" > /home/user/stamp.txt`);
  const rest = skipBeforeCopy ? start.skipCache() : start;
  return rest.copy('single.txt', '/home/user/cached-copy.txt').setEnvs({ TP_CACHE: run });
};

const stampOf = (name: string) => withSandbox(name, async (sbx) => (await sbx.files.read('/home/user/stamp.txt')).trim());

async function cacheChain() {
  const cold = await build(cacheTemplate(), `${names.cache}:c1`);
  const coldStamp = await stampOf(`${names.cache}:c1`);
  const warm = await build(cacheTemplate(), `${names.cache}:c2`);
  const warmStamp = await stampOf(`${names.cache}:c2`);
  const skipped = await build(cacheTemplate(), `${names.cache}:c3`, { skipCache: true });
  const skippedStamp = await stampOf(`${names.cache}:c3`);
  const partial = await build(cacheTemplate(true), `${names.cache}:c4`);
  const partialStamp = await stampOf(`${names.cache}:c4`);
  return { cold, coldStamp, warm, warmStamp, skipped, skippedStamp, partial, partialStamp };
}

/** Each step is added by its own named function, so the stack trace the SDK attaches to a BuildError names the step. */
function addFirstStep(template: TemplateBuilder): TemplateBuilder {
  return template.runCmd('echo step-one-ok');
}
function addFailingStep(template: TemplateBuilder): TemplateBuilder {
  return template.runCmd('echo about-to-fail && exit 7');
}

/** The SDK's 'build template with symlinks' and 'with resolveSymlinks' cases, on the platform base. */
function linksTemplate(): TemplateClass {
  return Template({ fileContextPath: ctx })
    .fromTemplate('base')
    .copy('folder/*', 'folder', { forceUpload: true })
    .runCmd('cat folder/symlink.txt')
    .copy('folder/symlink.txt', 'resolved/symlink.txt', { forceUpload: true, resolveSymlinks: true });
}

async function failingChain() {
  return failedBuild(addFailingStep(addFirstStep(Template().fromTemplate('base'))), names.failing);
}

async function neverReadyChain() {
  return failedBuild(Template().fromTemplate('base').runCmd('echo before-start').setStartCmd('sleep infinity', 'false'), names.neverReady);
}

beforeAll(async () => {
  platform = await startTestPlatform({ buildReadyTimeoutSeconds: READY_TIMEOUT_SECONDS });
  ctx = makeContext();
  chains.full = background(fullChain());
  chains.fromBase = background(build(Template().fromBaseImage().setWorkdir('/home/user/newdir').runCmd('pwd > /home/user/where.txt && whoami >> /home/user/where.txt'), names.fromBase));
  chains.debian = background(build(Template().fromImage('tidepool/debian:bookworm').runCmd('echo from-debian > /marker.txt', { user: 'root' }), names.debian));
  chains.links = background(build(linksTemplate(), names.links));
  chains.failing = background(failingChain());
  chains.neverReady = background(neverReadyChain());
  chains.noUser = background(failedBuild(Template().fromTemplate('base').runCmd('echo before').runCmd('whoami', { user: 'root123' }), names.noUser));
  chains.tagsV1 = background(build(Template().fromTemplate('base').runCmd(`echo v1-${run} > /home/user/version.txt`), `${names.tags}:v1`));
});

afterAll(async () => {
  await settleWithin(Object.values(chains), 120_000);
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
  if (ctx) rmSync(ctx, { recursive: true, force: true });
}, 300_000);

describe('Template.build with every step type', () => {
  it('builds and reports the template, build and tags', { timeout: 900_000 }, async () => {
    const { full } = await chains.full;
    expect(full.info).toMatchObject({ name: names.full, templateId: expect.any(String), buildId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const status = await Template.getBuildStatus(full.info, platform.sdk);
    expect(status).toMatchObject({ status: 'ready', templateID: full.info.templateId, buildID: full.info.buildId });
    expect(status.logEntries.length).toBeGreaterThan(0);
    // Past the end of the log: an empty page, which is what lets the SDK stop polling.
    expect((await Template.getBuildStatus(full.info, { ...platform.sdk, logsOffset: 100_000 })).logEntries).toEqual([]);
    expect(await Template.exists(names.full, platform.sdk)).toBe(true);
  });

  it('gives a sandbox the files, modes, symlinks, envs, user, workdir and the running start command', { timeout: 900_000 }, async () => {
    const { full } = await chains.full;
    await withSandbox(
      names.full,
      async (sbx) => {
        expect((await sbx.getInfo()).templateId).toBe(full.info.templateId);
        const facts = await probe(sbx, {
          whoami: 'whoami',
          pwd: 'pwd',
          buildUser: 'cat /srv/work/build-user.txt',
          buildPwd: 'cat /srv/work/build-pwd.txt',
          rootRun: 'cat /opt/tp/run.txt',
          defaultRunUser: 'cat /home/user/default-run-user.txt',
          greeting: 'echo "$TP_GREETING"',
          spaced: 'echo "[$TP_SPACED]"',
          override: 'echo "$TP_OVERRIDE"',
          envAtBuild: 'cat /opt/tp/env-at-build.txt',
          hello: 'cat /opt/app/hello.txt',
          modes: 'stat -c "%n %a" /opt/app/hello.txt /opt/app/run.sh /opt/app/secret.txt /opt/single/single.txt',
          script: '/opt/app/run.sh',
          deep: 'cat /opt/app/nested/deep.txt',
          link: 'readlink /opt/app/link.txt',
          linkContent: 'cat /opt/app/link.txt',
          resolved: 'test -f /opt/resolved/link.txt && test ! -L /opt/resolved/link.txt && cat /opt/resolved/link.txt',
          owned: 'stat -c %U /opt/owned.txt',
          globbed: 'ls /opt/cfg',
          relative: 'cat /srv/work/rel/single.txt',
          startCmd: "pgrep -u tpuser -f 'http[.]server 8123' >/dev/null && echo running",
        });
        expect(facts).toEqual({
          whoami: 'tpuser',
          pwd: '/srv/work',
          buildUser: 'tpuser',
          buildPwd: '/srv/work',
          rootRun: 'built-by-root',
          defaultRunUser: 'user',
          greeting: 'hello env',
          spaced: '[a  b c]',
          override: 'from-sandbox',
          envAtBuild: 'hello env',
          hello: `hello from copy ${run}`,
          modes: '/opt/app/hello.txt 644|/opt/app/run.sh 755|/opt/app/secret.txt 600|/opt/single/single.txt 640',
          script: 'script-ran',
          deep: 'deep',
          link: 'hello.txt',
          linkContent: `hello from copy ${run}`,
          resolved: `hello from copy ${run}`,
          owned: 'user',
          globbed: 'a.cfg|b.cfg',
          relative: `single ${run}`,
          startCmd: 'running',
        });
        // The start command serves the workdir; the sandbox is ready when create returns.
        const served = await until(() => viaProxy(platform, sbx.sandboxId, 8123, '/index.txt'), (r) => r.status === 200, 3_000);
        expect(served).toEqual({ status: 200, body: 'served-from-workdir\n' });
      },
      { envs: { TP_OVERRIDE: 'from-sandbox' } },
    );
  });

  it('COPY keeps symlinks as symlinks whatever they point to; resolveSymlinks copies the file', { timeout: 900_000 }, async () => {
    const links = await chains.links;
    expect(links.logs.join('\n')).toContain('This is a test file.');
    await withSandbox(names.links, async (sbx) => {
      const facts = await probe(sbx, {
        kinds: 'cd /home/user/folder && stat -c "%n %F" test.txt symlink.txt symlink2.txt absolute.txt symlink3.txt up',
        targets: 'cd /home/user/folder && readlink symlink.txt symlink2.txt absolute.txt symlink3.txt up',
        through: 'cat /home/user/folder/symlink.txt',
        resolved: 'test -f /home/user/resolved/symlink.txt && test ! -L /home/user/resolved/symlink.txt && cat /home/user/resolved/symlink.txt',
      });
      expect(facts).toEqual({
        kinds: 'test.txt regular file|symlink.txt symbolic link|symlink2.txt symbolic link|absolute.txt symbolic link|symlink3.txt symbolic link|up symbolic link',
        targets: `test.txt|${join(ctx, 'folder', 'test.txt')}|/etc/hostname|12345test.txt|../../outside`,
        through: 'This is a test file.',
        resolved: 'This is a test file.',
      });
    });
  });

  it('layers fromTemplate on a built template: its files, envs, user and workdir carry over', { timeout: 900_000 }, async () => {
    const { full, child } = await chains.full;
    expect(child.info.templateId).not.toBe(full.info.templateId);
    await withSandbox(names.child, async (sbx) => {
      expect(
        await probe(sbx, {
          whoami: 'whoami',
          pwd: 'pwd',
          childFile: 'cat /opt/tp/child.txt',
          childUser: 'cat /srv/work/child-user.txt',
          greeting: 'echo "$TP_GREETING"',
          inherited: 'cat /opt/app/nested/deep.txt',
        }),
      ).toEqual({ whoami: 'tpuser', pwd: '/srv/work', childFile: 'built-by-root', childUser: 'child-tpuser', greeting: 'hello env', inherited: 'deep' });
    });
  });

  it('maps fromBaseImage() to the platform base image; WORKDIR creates a missing directory', { timeout: 900_000 }, async () => {
    await chains.fromBase;
    await withSandbox(names.fromBase, async (sbx) => {
      expect(await probe(sbx, { whoami: 'whoami', pwd: 'pwd', where: 'cat /home/user/where.txt', sudo: 'sudo -n whoami' })).toEqual({
        whoami: 'user',
        pwd: '/home/user/newdir',
        where: '/home/user/newdir|user',
        sudo: 'root',
      });
    });
  });

  it('builds fromImage on a local image and still runs envd as `user` in it', { timeout: 900_000 }, async () => {
    await chains.debian;
    await withSandbox(names.debian, async (sbx) => {
      const facts = await probe(sbx, { marker: 'cat /marker.txt', whoami: 'whoami', python: 'command -v python3 || echo none', debian: 'cut -d. -f1 /etc/debian_version' });
      // No python3: the sandbox really runs the plain Debian image, not the platform's base image.
      expect(facts).toEqual({ marker: 'from-debian', whoami: 'user', python: 'none', debian: '12' });
    });
  });
});

describe('the layer cache', () => {
  it('a second identical build is fully CACHED, faster, and reuses the layers; skipCache rebuilds', { timeout: 900_000 }, async () => {
    // Build times are compared, so these builds run alone: after every other chain, never behind them in the build queue.
    await Promise.allSettled(Object.values(chains));
    chains.cache = background(cacheChain());
    const r = await chains.cache;
    const cachedLines = (logs: string[]) => logs.filter((line) => line.includes('CACHED'));
    const mentions = (logs: string[], text: string) => cachedLines(logs).some((line) => line.includes(text));

    for (const text of ['sleep 5', 'single.txt', 'TP_CACHE']) {
      expect(mentions(r.cold.logs, text), `cold build must not report '${text}' as CACHED`).toBe(false);
      expect(mentions(r.warm.logs, text), `warm build must report '${text}' as CACHED:\n${r.warm.logs.join('\n')}`).toBe(true);
      expect(mentions(r.skipped.logs, text), `skipCache build must not report '${text}' as CACHED`).toBe(false);
    }
    // The uploaded COPY context is known to the platform the second time (GET files/{hash} → present: true).
    expect(r.warm.logs).toContain("Skipping upload of 'single.txt', already cached");
    expect(r.cold.logs).toContain("Uploaded 'single.txt'");
    // Same layer, same file: the RUN step did not run again.
    expect(r.warmStamp).toBe(r.coldStamp);
    expect(r.warm.ms, `cold ${r.cold.ms} ms, warm ${r.warm.ms} ms`).toBeLessThan(r.cold.ms - 4_000);
    expect(r.warm.ms).toBeLessThan(30_000);
    // skipCache: everything ran again.
    expect(r.skippedStamp).not.toBe(r.coldStamp);
    expect(r.skipped.ms).toBeGreaterThan(5_000);
    // .skipCache() in the chain: the steps before it stay cached, the ones after it run.
    expect(mentions(r.partial.logs, 'sleep 5')).toBe(true);
    expect(mentions(r.partial.logs, 'single.txt')).toBe(false);
    expect(mentions(r.partial.logs, 'TP_CACHE')).toBe(false);
    expect([r.coldStamp, r.skippedStamp]).toContain(r.partialStamp);
    // All four builds are builds of one template.
    expect(new Set([r.cold, r.warm, r.skipped, r.partial].map((b: Built) => b.info.templateId)).size).toBe(1);
  });
});

describe('failing builds', () => {
  it('a failing RUN step throws BuildError pointing at that step, with its output in the logs', { timeout: 900_000 }, async () => {
    const r = await chains.failing;
    expect(r.error).toBeInstanceOf(BuildError);
    expect(r.error.message).toMatch(/7/);
    // The SDK attaches the stack trace of the step named by reason.step: the failing runCmd call.
    expect.soft(r.error.stack?.split('\n')[0]).toMatch(/^\s*at addFailingStep \(.*sdk-templates\.test\.ts:\d+:\d+\)$/);
    const status = await Template.getBuildStatus(r, platform.sdk);
    expect(status).toMatchObject({ status: 'error', reason: { step: '2', message: r.error.message } });
    expect(r.logs.join('\n')).toContain('step-one-ok');
    expect(r.logs.join('\n')).toContain('about-to-fail');
    // No sandbox can start from a template whose only build failed.
    const create = await rejectionOf(Sandbox.create(names.failing, platform.sdk));
    expect(create).toBeInstanceOf(SandboxError);
    expect(create.statusCode).toBe(404);
  });

  it('RUN as a user the image lacks fails with the reference message (SDK "run command as user that does not exist")', { timeout: 900_000 }, async () => {
    const r = await chains.noUser;
    const expected = "failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'";
    expect(r.error).toBeInstanceOf(BuildError);
    expect(r.error.message).toContain(expected);
    const status = await Template.getBuildStatus(r, platform.sdk);
    expect(status).toMatchObject({ status: 'error', reason: { step: '2', message: expected } });
    expect(r.logs.join('\n')).toContain(expected);
  });

  it('a readyCmd that never succeeds fails the build in the finalize step', { timeout: 900_000 }, async () => {
    const r = await chains.neverReady;
    expect(r.error).toBeInstanceOf(BuildError);
    expect(r.error.message).toMatch(/ready/i);
    const status = await Template.getBuildStatus(r, platform.sdk);
    expect(status).toMatchObject({ status: 'error', reason: { step: 'finalize' } });
    expect(r.logs.join('\n')).toContain('before-start');
    expect(r.ms).toBeLessThan((READY_TIMEOUT_SECONDS + 120) * 1000);
  });

  it('an unknown fromTemplate fails with BuildError naming it', { timeout: 300_000 }, async () => {
    const error = await rejectionOf(Template.build(Template().fromTemplate(`tp-no-such-${run}`).runCmd('true'), `tp-orphan-${run}`, platform.sdk));
    expect(error).toBeInstanceOf(BuildError);
    expect(error.message).toContain(`tp-no-such-${run}`);
  });

  it('a bad template name is refused before anything is built', async () => {
    const error = await rejectionOf(Template.build(Template().fromTemplate('base'), 'Bad Name!', platform.sdk));
    expect(error).toBeInstanceOf(BuildError);
    expect(error.message).toMatch(/^400: /);
    expect(await Template.exists('Bad Name!', platform.sdk).catch((e: Error) => e)).toBeInstanceOf(TemplateError);
  });
});

describe('tags', () => {
  it('builds name:v1, assigns, moves and removes tags, and sandboxes start from name:tag', { timeout: 900_000 }, async () => {
    const v1: Built = await chains.tagsV1;
    const name = names.tags;
    expect(v1.info.name).toBe(`${name}:v1`);
    expect(v1.info.tags).toEqual(['v1']);
    expect(await Template.exists(name, platform.sdk)).toBe(true);
    expect(await Template.exists(`${name}-nope`, platform.sdk)).toBe(false);
    expect(await Template.exists('base', platform.sdk)).toBe(true);

    const tagsOf = async (ref: string) =>
      Object.fromEntries((await Template.getTags(ref, platform.sdk)).map((t) => {
        expect(t.createdAt).toBeInstanceOf(Date);
        expect(Number.isNaN(t.createdAt.getTime())).toBe(false);
        return [t.tag, t.buildId];
      }));
    expect(await tagsOf(name)).toEqual({ v1: v1.info.buildId });
    expect(await tagsOf(v1.info.templateId)).toEqual({ v1: v1.info.buildId });

    expect(await Template.assignTags(`${name}:v1`, ['prod', 'stable'], platform.sdk)).toEqual({ buildId: v1.info.buildId, tags: ['prod', 'stable'] });
    expect(await Template.assignTags(`${name}:v1`, 'single', platform.sdk)).toEqual({ buildId: v1.info.buildId, tags: ['single'] });
    const version = (ref: string) => withSandbox(ref, async (sbx) => (await sbx.files.read('/home/user/version.txt')).trim());
    expect(await version(`${name}:prod`)).toBe(`v1-${run}`);

    const v2 = await build(Template().fromTemplate('base').runCmd(`echo v2-${run} > /home/user/version.txt`), `${name}:v2`);
    expect(v2.info.templateId).toBe(v1.info.templateId);
    expect(v2.info.buildId).not.toBe(v1.info.buildId);
    expect(await tagsOf(name)).toEqual({ v1: v1.info.buildId, prod: v1.info.buildId, stable: v1.info.buildId, single: v1.info.buildId, v2: v2.info.buildId });
    expect(await version(`${name}:v1`)).toBe(`v1-${run}`);
    expect(await version(`${name}:v2`)).toBe(`v2-${run}`);

    // Moving a tag: prod now means the v2 build.
    expect(await Template.assignTags(`${name}:v2`, 'prod', platform.sdk)).toEqual({ buildId: v2.info.buildId, tags: ['prod'] });
    expect(await version(`${name}:prod`)).toBe(`v2-${run}`);

    await Template.removeTags(name, ['stable', 'single'], platform.sdk);
    expect(await tagsOf(name)).toEqual({ v1: v1.info.buildId, prod: v2.info.buildId, v2: v2.info.buildId });
    const gone = await rejectionOf(Sandbox.create(`${name}:stable`, platform.sdk));
    expect(gone).toBeInstanceOf(SandboxError);
    expect(gone.statusCode).toBe(404);

    for (const [call, status] of [
      [() => Template.removeTags(name, 'never-existed', platform.sdk), 404],
      [() => Template.removeTags(`${name}-nope`, 'v1', platform.sdk), 404],
      [() => Template.assignTags(`${name}:nope`, 'x', platform.sdk), 404],
      [() => Template.assignTags(`${name}:v1`, ':bad', platform.sdk), 400],
      [() => Template.assignTags(`${name}:v1`, 'bad tag', platform.sdk), 400],
      [() => Template.getTags(`${name}-nope`, platform.sdk), 404],
    ] as const) {
      const error = await rejectionOf(call());
      expect(error, String(call)).toBeInstanceOf(TemplateError);
      expect(error.statusCode, `${call}: ${error.message}`).toBe(status);
    }
    // Nothing above changed the tags.
    expect(await tagsOf(name)).toEqual({ v1: v1.info.buildId, prod: v2.info.buildId, v2: v2.info.buildId });
    expect((await api(platform, 'GET', '/health')).status).toBe(200);
  });
});

import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { PlatformImageBuild, SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { DESKTOP_TEMPLATE_ID, type TemplateCatalog } from './template-catalog.ts';
import type { SandboxDefaults } from './template-model.ts';

/** The image's sources, shipped with the platform (docker/desktop). */
export const DESKTOP_CONTEXT_DIR = fileURLToPath(new URL('../../../../docker/desktop', import.meta.url));

/**
 * What a `desktop` sandbox starts with: nothing running. `@e2b/desktop` starts Xvfb and the xfce4 session itself
 * with commands; the image's Xvfb wrapper starts the display keeper beside it (docker/desktop). No start command, so
 * the SDK's DISPLAY env var does not keep its sandboxes out of the warm pool.
 */
export const DESKTOP_DEFAULTS: SandboxDefaults = { user: 'user', workdir: '/home/user', envs: {}, startCmd: null, readyCmd: null };

/** Every file of the context (relative, sorted) and their digest (contents, modes and symbolic links). */
export function desktopContext(dir: string = DESKTOP_CONTEXT_DIR): { files: string[]; hash: string } {
  const files: string[] = [];
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(relative(dir, path));
    }
  };
  walk(dir);
  files.sort();
  const digest = createHash('sha256');
  for (const file of files) {
    const path = join(dir, file);
    const stat = lstatSync(path);
    const body = stat.isSymbolicLink() ? `link:${readlinkSync(path)}` : createHash('sha256').update(readFileSync(path)).digest('hex');
    digest.update(`${file}\0${(stat.mode & 0o777).toString(8)}\0${body}\n`);
  }
  return { files, hash: digest.digest('hex') };
}

interface DesktopSettings {
  /** TIDEPOOL_DESKTOP_IMAGE: the image's name; '' = no desktop template. */
  desktopImage: string;
  baseImage: string;
}

/**
 * The built-in `desktop` template. Its image is large (an X desktop, a browser), so it is never built before the API
 * answers: at start the template is registered ready when its image is current, or as building otherwise; after the
 * API listens the image is built in the background (progress in the platform log and the build's log), and a create
 * of `desktop` meanwhile waits for it instead of failing. A failed build withdraws the template with the reason.
 */
export class DesktopTemplate {
  private building: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private pendingBuild: PlatformImageBuild | undefined;

  constructor(
    private readonly catalog: TemplateCatalog,
    private readonly settings: DesktopSettings,
    private readonly logger: Logger,
    private readonly contextDir: string = DESKTOP_CONTEXT_DIR,
  ) {}

  /** At start (after interrupted builds were failed): registers the template from the image, or as building. */
  async register(runtime: SandboxRuntime): Promise<void> {
    const image = this.settings.desktopImage;
    if (image === '') {
      await this.catalog.withdrawBuiltin(DESKTOP_TEMPLATE_ID, 'TIDEPOOL_DESKTOP_IMAGE is empty: this platform offers no desktop template');
      return;
    }
    let build: PlatformImageBuild | undefined;
    try {
      const { files, hash } = desktopContext(this.contextDir);
      build = { image, contextDir: this.contextDir, files, baseImage: this.settings.baseImage, contextHash: hash };
    } catch (error) {
      this.logger.warn({ err: error, contextDir: this.contextDir }, 'the desktop image sources are not readable; the desktop template is offered only when its image exists');
    }
    const canBuild = build !== undefined && runtime.platformImageCurrent !== undefined && runtime.buildPlatformImage !== undefined;
    const current = canBuild ? await runtime.platformImageCurrent!(build!) : (await runtime.imageExists(image)) || undefined;
    if (current === true || (current === false && !canBuild)) {
      await this.registerReady(runtime, image);
      return;
    }
    if (!canBuild) {
      await this.withdrawOrMark(`its image '${image}' does not exist and this engine does not build it: build it on this machine (the API with an engine builds it by itself) or set TIDEPOOL_DESKTOP_IMAGE`);
      return;
    }
    // Missing, or older than its sources or the base image (another envd): sandboxes wait for the new one.
    await this.catalog.registerBuiltinBuilding(this.builtinSpec(), `waiting for the API to listen; then its image '${image}' is built`);
    this.pendingBuild = build;
    this.logger.info({ image, stale: current === false }, `the desktop image ${current === false ? 'is older than its sources or the base image' : 'does not exist yet'}; it is built after the API listens, and a desktop sandbox waits for it`);
  }

  /** After the API listens: builds the image `register` found missing or stale, once; creates of `desktop` wait for it. */
  buildInBackground(runtime: SandboxRuntime): void {
    const build = this.pendingBuild;
    if (!build || this.building || !runtime.buildPlatformImage) return;
    const started = Date.now();
    const log = this.logger.child({ template: DESKTOP_TEMPLATE_ID, image: build.image });
    log.info('building the desktop image (Debian packages: a few minutes the first time)');
    let lines = 0;
    const progress = (line: string): void => {
      lines += 1;
      // Steps always; the packages' lines every so often, so the log shows it moving without flooding it.
      if (/^Step \d+\/\d+/.test(line) || lines % 50 === 0) log.info({ line: line.slice(0, 300) }, 'desktop image build');
      void this.catalog.appendBuiltinLog(DESKTOP_TEMPLATE_ID, 'info', line.slice(0, 2000)).catch(() => undefined);
    };
    const running = runtime
      .buildPlatformImage(build, progress, this.abort.signal)
      .then(async () => {
        await this.registerReady(runtime, build.image);
        log.info({ seconds: Math.round((Date.now() - started) / 1000) }, 'desktop image built; the desktop template is ready');
      })
      .catch(async (error: unknown) => {
        if (this.abort.signal.aborted) return;
        const why = `building its image failed: ${error instanceof Error ? error.message : String(error)}`;
        if (await runtime.imageExists(build.image).catch(() => false)) {
          // An older image (or one built elsewhere, e.g. where the engine refuses builds) still serves.
          log.error({ err: error }, `the desktop image could not be brought up to date; its existing image serves: ${why}`);
          await this.registerReady(runtime, build.image).catch(() => undefined);
          return;
        }
        log.error({ err: error }, `the desktop template is not offered: ${why}`);
        await this.catalog.withdrawBuiltin(DESKTOP_TEMPLATE_ID, why).catch(() => undefined);
      });
    this.building = running;
    this.catalog.awaitBuiltinBuild(DESKTOP_TEMPLATE_ID, running);
  }

  /** Stops a build in progress (the platform is closing). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.building;
  }

  private async registerReady(runtime: SandboxRuntime, image: string): Promise<void> {
    const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
    await this.catalog.registerBuiltin(this.builtinInput(image, envdVersion));
  }

  private async withdrawOrMark(why: string): Promise<void> {
    await this.catalog.registerBuiltinBuilding(this.builtinSpec(), why);
    await this.catalog.withdrawBuiltin(DESKTOP_TEMPLATE_ID, why);
    this.logger.warn(`the '${DESKTOP_TEMPLATE_ID}' template is not offered: ${why}`);
  }

  private builtinSpec() {
    return { templateId: DESKTOP_TEMPLATE_ID, alias: DESKTOP_TEMPLATE_ID, defaults: DESKTOP_DEFAULTS, cpuCount: 2, memoryMB: 2048 };
  }

  private builtinInput(image: string, envdVersion: string) {
    return { ...this.builtinSpec(), image, envdVersion };
  }
}

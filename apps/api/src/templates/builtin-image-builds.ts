import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { type BuiltinImageTemplate, registerBuiltinFromImage } from './base-template.ts';
import type { TemplateCatalog } from './template-catalog.ts';

interface PlannedBuild {
  template: BuiltinImageTemplate & { buildTarget: string };
  image: string;
  runtime: SandboxRuntime;
  /** The image was there at start: the template stays usable while the builder brings it up to date. */
  existed: boolean;
  done: () => void;
}

/** Lines of the builder's output kept for the failure message. */
const TAIL_LINES = 6;
/** Longest line kept (build logs and the failure message). */
const MAX_LINE = 2000;

/**
 * Runs TIDEPOOL_BUILTIN_IMAGE_BUILDER for the images of built-in templates, one build at a time, after the API
 * listens: `<builder> <target> <image>` must leave `image` in the engine and exit 0 (a no-op when it is current).
 * Its output is the template's build log (the dashboard's template list shows it) and, for its own progress lines
 * (`[...]` prefixed), the platform's log. A failure withdraws the template with the builder's last lines as the
 * reason, which is what waiting creates answer.
 */
export class BuiltinImageBuilds {
  private readonly planned: PlannedBuild[] = [];
  private chain: Promise<void> = Promise.resolve();
  private child: ChildProcess | undefined;
  private stopped = false;

  constructor(private readonly catalog: TemplateCatalog, private readonly builder: string, private readonly logger: Logger) {}

  get enabled(): boolean {
    return this.builder !== '';
  }

  /** Plans a build; creates of a template whose image is missing wait for it from now on. */
  plan(template: PlannedBuild['template'], image: string, runtime: SandboxRuntime, existed: boolean): void {
    let done!: () => void;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    if (!existed) this.catalog.awaitBuiltinBuild(template.templateId, finished);
    this.planned.push({ template, image, runtime, existed, done });
  }

  start(): void {
    for (const build of this.planned.splice(0)) {
      this.chain = this.chain.then(() => this.build(build)).catch((error: unknown) => {
        this.logger.error({ err: error, templateId: build.template.templateId }, 'built-in template image build failed unexpectedly');
      }).finally(build.done);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const build of this.planned.splice(0)) build.done();
    if (this.child?.pid !== undefined && this.child.exitCode === null) {
      try {
        process.kill(-this.child.pid, 'SIGTERM'); // the builder's own process group (it was started detached)
      } catch {
        // already gone
      }
    }
    await this.chain;
  }

  private async build(build: PlannedBuild): Promise<void> {
    if (this.stopped) return;
    const { template, image, runtime, existed } = build;
    const log = this.logger.child({ templateId: template.templateId, image });
    const started = Date.now();
    log.info(existed ? `checking that the ${template.alias} image is current` : `building the ${template.alias} image (creates of it wait)`);
    if (!existed) await this.catalog.appendBuiltinLog(template.templateId, 'info', `building image '${image}' with ${this.builder} ${template.buildTarget}`);
    const outcome = await this.run(template.buildTarget, image, (line) => {
      if (/^\[[\w -]+\]/.test(line)) log.info({ builder: line }, 'built-in template image build');
      else log.debug({ builder: line }, 'built-in template image build');
      if (!existed) void this.catalog.appendBuiltinLog(template.templateId, 'info', line).catch(() => undefined);
    });
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    if (this.stopped && outcome.problem) {
      log.info('built-in template image build stopped with the platform');
      return;
    }
    const problem = outcome.problem ?? ((await runtime.imageExists(image)) ? undefined : `the builder exited 0 but left no image '${image}'`);
    if (!problem) {
      await registerBuiltinFromImage(this.catalog, runtime, template, image, this.logger);
      log.info({ seconds }, `${template.alias} image ready`);
      return;
    }
    log.error({ seconds, problem }, `building the ${template.alias} image failed`);
    if (existed) return; // the image found at start stays in use
    await this.catalog.appendBuiltinLog(template.templateId, 'error', problem);
    await this.catalog.withdrawBuiltin(template.templateId, `building its image '${image}' failed: ${problem}`);
  }

  /** Runs the builder; `problem` says why it failed (exit status and its last lines), undefined when it succeeded. */
  private run(target: string, image: string, onLine: (line: string) => void): Promise<{ problem?: string }> {
    return new Promise((resolve) => {
      const tail: string[] = [];
      const child = spawn(this.builder, [target, image], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      this.child = child;
      const read = (stream: NodeJS.ReadableStream): void => {
        createInterface({ input: stream }).on('line', (raw) => {
          const line = raw.length > MAX_LINE ? `${raw.slice(0, MAX_LINE)}…` : raw;
          if (line.trim() === '') return;
          tail.push(line);
          if (tail.length > TAIL_LINES) tail.shift();
          onLine(line);
        });
      };
      read(child.stdout!);
      read(child.stderr!);
      child.once('error', (error) => resolve({ problem: `the builder could not be started: ${error.message}` }));
      child.once('close', (code, signal) => {
        this.child = undefined;
        if (code === 0) resolve({});
        else resolve({ problem: `${signal ? `the builder was killed by ${signal}` : `the builder exited with status ${code}`}${tail.length ? `: ${tail.join(' | ')}` : ''}` });
      });
    });
  }
}

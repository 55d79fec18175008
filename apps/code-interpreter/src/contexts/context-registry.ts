import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { type ExecuteRequest, type ExecutionSink, INTERPRETER_ERROR_NAME, InterpreterError, type Kernel } from '../kernels/kernel.ts';
import { ExecutionQueue } from './execution-queue.ts';
import type { Language } from './languages.ts';

export interface ContextView {
  id: string;
  language: Language;
  cwd: string;
}

/** Makes (not starts) the kernel of a context. */
export type KernelFactory = (language: Language, cwd: string, logger: Logger) => Kernel;

interface Context extends ContextView {
  kernel: Kernel;
  /** Resolves when the kernel has started (rejects when it could not). */
  starting: Promise<void>;
  queue: ExecutionQueue;
  /** The sandbox's global env vars were given to this kernel. */
  globalEnvSent: boolean;
  isDefault: boolean;
  logger: Logger;
}

/** The contexts of this server: their kernels, their queues, restarts, and the default context per language. */
export class ContextRegistry {
  private readonly contexts = new Map<string, Context>();
  private readonly defaults = new Map<Language, string>();
  /** Kernels started ahead (in the default cwd) for languages whose start is slow: new contexts and restarts take them. */
  private readonly spares = new Map<Language, { kernel: Kernel; started: Promise<boolean> }>();
  private spareLanguages: Language[] = [];
  private stopped = false;

  constructor(
    private readonly makeKernel: KernelFactory,
    private readonly logger: Logger,
    private readonly defaultCwd: string,
  ) {}

  /** Keeps one started kernel ready for each of these languages (from now on, refilled after each use). */
  keepSpares(languages: Language[]): void {
    this.spareLanguages = languages;
    for (const language of languages) this.refillSpare(language);
  }

  private refillSpare(language: Language): void {
    if (this.stopped || !this.spareLanguages.includes(language) || this.spares.has(language)) return;
    const logger = this.logger.child({ spare: true, language });
    const kernel = this.makeKernel(language, this.defaultCwd, logger);
    if (!kernel.relocate) return;
    const started = kernel.start().then(
      () => true,
      (error: Error) => {
        logger.warn({ err: error.message }, 'spare kernel did not start');
        if (this.spares.get(language)?.kernel === kernel) this.spares.delete(language);
        return false;
      },
    );
    this.spares.set(language, { kernel, started });
  }

  /** A started kernel for `language` in `cwd`: the spare when there is one ready (it is then refilled), else a new one. */
  private async startKernel(language: Language, cwd: string, logger: Logger): Promise<Kernel> {
    const spare = this.spares.get(language);
    if (spare) {
      this.spares.delete(language);
      this.refillSpare(language);
      if ((await spare.started) && spare.kernel.alive) {
        try {
          if (cwd !== this.defaultCwd) await spare.kernel.relocate!(cwd);
          return spare.kernel;
        } catch (error) {
          logger.warn({ err: (error as Error).message }, 'spare kernel could not be used; starting one');
          await spare.kernel.stop().catch(() => undefined);
        }
      }
    }
    const kernel = this.makeKernel(language, cwd, logger);
    try {
      await kernel.start();
    } catch (error) {
      await kernel.stop().catch(() => undefined);
      throw error;
    }
    return kernel;
  }

  list(): ContextView[] {
    return [...this.contexts.values()].map(view);
  }

  get(id: string): ContextView | undefined {
    const context = this.contexts.get(id);
    return context ? view(context) : undefined;
  }

  /** Creates a context and waits for its interpreter; a context whose interpreter fails is not kept. */
  async create(language: Language, cwd = this.defaultCwd, isDefault = false): Promise<ContextView> {
    const id = randomUUID();
    const logger = this.logger.child({ contextId: id, language });
    const kernelReady = this.startKernel(language, cwd, logger);
    const context: Context = { id, language, cwd, kernel: STARTING, starting: settledLater(kernelReady), queue: new ExecutionQueue(), globalEnvSent: false, isDefault, logger };
    this.contexts.set(id, context);
    if (isDefault) this.defaults.set(language, id);
    try {
      context.kernel = await kernelReady;
    } catch (error) {
      this.contexts.delete(id);
      if (this.defaults.get(language) === id) this.defaults.delete(language);
      throw error;
    }
    if (!this.contexts.has(id)) {
      // Removed while its kernel was starting.
      await context.kernel.stop().catch(() => undefined);
      throw new InterpreterError(`context '${id}' was removed while it started`);
    }
    logger.info({ cwd }, 'context started');
    return view(context);
  }

  /** The default context of a language, created on first use. */
  async defaultFor(language: Language): Promise<ContextView> {
    const id = this.defaults.get(language);
    const existing = id ? this.contexts.get(id) : undefined;
    if (existing) {
      await existing.starting.catch(() => undefined);
      return view(existing);
    }
    return this.create(language, this.defaultCwd, true);
  }

  /**
   * Runs code in a context after the executions before it. A kernel that died meanwhile is replaced first
   * (the code then runs in a fresh interpreter). `globalEnv` is fetched only for kernels that have not had it.
   */
  async execute(id: string, code: string, executionEnv: Record<string, string>, globalEnv: () => Promise<Record<string, string>>, sink: ExecutionSink, signal: AbortSignal): Promise<void> {
    const context = this.contexts.get(id);
    if (!context) throw new InterpreterError(`context '${id}' does not exist`);
    await context.queue.run(async () => {
      if (signal.aborted) return;
      try {
        const started = await context.starting.then(() => true, () => false);
        if (!context.kernel.alive) await this.replaceKernel(context, started ? 'its interpreter had exited' : 'its interpreter had not started');
      } catch (error) {
        sink.error(INTERPRETER_ERROR_NAME, `the ${context.language} interpreter of this context could not start: ${(error as Error).message}`, '');
        return;
      }
      const request: ExecuteRequest = { code, env: { global: {}, execution: executionEnv } };
      if (!context.globalEnvSent) {
        request.env.global = await globalEnv();
        context.globalEnvSent = true;
      }
      const started = Date.now();
      await context.kernel.execute(request, sink, signal);
      context.logger.debug({ ms: Date.now() - started, interrupted: signal.aborted }, 'execution finished');
    });
  }

  /** Fresh interpreter state under the same id. A running execution ends with an error frame. */
  async restart(id: string): Promise<boolean> {
    const context = this.contexts.get(id);
    if (!context) return false;
    await this.replaceKernel(context, 'restart requested');
    return true;
  }

  async remove(id: string): Promise<boolean> {
    const context = this.contexts.get(id);
    if (!context) return false;
    this.contexts.delete(id);
    if (this.defaults.get(context.language) === id) this.defaults.delete(context.language);
    await context.kernel.stop();
    context.logger.info('context removed');
    return true;
  }

  async stopAll(): Promise<void> {
    this.stopped = true;
    const spares = [...this.spares.values()].map((s) => s.kernel);
    this.spares.clear();
    await Promise.all([...this.contexts.values()].map((c) => c.kernel).concat(spares).map((k) => k.stop().catch(() => undefined)));
    this.contexts.clear();
    this.defaults.clear();
  }

  private async replaceKernel(context: Context, why: string): Promise<void> {
    context.logger.info({ why }, 'restarting context');
    const old = context.kernel;
    await old.stop().catch(() => undefined);
    context.kernel = STARTING;
    context.globalEnvSent = false;
    const kernelReady = this.startKernel(context.language, context.cwd, context.logger);
    context.starting = settledLater(kernelReady);
    context.kernel = await kernelReady;
  }
}

/**
 * A context's `starting`: settles with its kernel start. Nobody may be waiting on it when the start fails (the
 * failure reaches the caller through the kernel promise), so it is marked handled here: an unobserved rejection
 * would end the server process.
 */
function settledLater(kernelReady: Promise<unknown>): Promise<void> {
  const starting = kernelReady.then(() => undefined);
  starting.catch(() => undefined);
  return starting;
}

/** Stands for a context's kernel while it starts: executions wait on `starting` first, so it is never asked to run. */
const STARTING: Kernel = {
  alive: false,
  start: () => Promise.reject(new InterpreterError('the interpreter is starting')),
  execute: (_request, sink) => {
    sink.error(INTERPRETER_ERROR_NAME, 'the interpreter of this context is starting', '');
    return Promise.resolve();
  },
  stop: () => Promise.resolve(),
};

const view = (context: Context): ContextView => ({ id: context.id, language: context.language, cwd: context.cwd });

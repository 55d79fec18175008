import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { registerBaseTemplate, registerCodeInterpreterTemplate } from './base-template.ts';
import type { TemplateCatalog } from './template-catalog.ts';

/**
 * The built-in templates (`base`, `code-interpreter-v1`), registered from an engine that has their images: the
 * embedded node's at start (a missing base image stops the start), or for an engine-free API the first ready node
 * agent's, retried at every node sweep until it succeeds.
 */
export class BuiltinTemplates {
  private registered = false;

  constructor(
    private readonly templates: TemplateCatalog,
    private readonly config: Pick<Config, 'baseImage' | 'codeInterpreterImage'>,
    private readonly logger: Logger,
  ) {}

  /**
   * `ensure` first brings an image onto the node where it can (a node image in the cluster's registry is pulled
   * there on first use); the code interpreter's failing to come leaves the base template registered.
   */
  async register(runtime: SandboxRuntime, ensure?: (image: string) => Promise<void>): Promise<void> {
    await ensure?.(this.config.baseImage);
    await registerBaseTemplate(this.templates, runtime, this.config.baseImage, this.logger);
    if (ensure && this.config.codeInterpreterImage) {
      await ensure(this.config.codeInterpreterImage).catch((error: unknown) => this.logger.warn({ err: error, image: this.config.codeInterpreterImage }, 'code interpreter image not pulled onto the node'));
    }
    await registerCodeInterpreterTemplate(this.templates, runtime, this.config.codeInterpreterImage, this.logger);
    this.registered = true;
  }

  /** Registers once from a node's engine; a failure is logged and the next call tries again. */
  async registerOnce(runtime: SandboxRuntime, ensure?: (image: string) => Promise<void>): Promise<void> {
    if (this.registered) return;
    await this.register(runtime, ensure).catch((error: unknown) => this.logger.warn({ err: error }, 'built-in templates not registered from a node yet; retrying at the next node sweep'));
  }
}

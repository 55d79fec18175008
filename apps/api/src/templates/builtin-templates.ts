import type { Logger } from 'pino';
import type { TemplateSettings } from './template-settings.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { type BuiltinImageTemplate, CODE_INTERPRETER_DEFAULTS, registerBaseTemplate, registerBuiltinFromImage } from './base-template.ts';
import { BuiltinImageBuilds } from './builtin-image-builds.ts';
import { CODE_INTERPRETER_TEMPLATE_ID, CODE_INTERPRETER_TEMPLATE_NAME, type TemplateCatalog } from './template-catalog.ts';

export type BuiltinTemplatesConfig = Pick<TemplateSettings, 'baseImage' | 'codeInterpreterImage' | 'builtinImageBuilder'>;

/**
 * A built-in template besides `base`, whose image only its own sandboxes need. When the platform may build images
 * (TIDEPOOL_BUILTIN_IMAGE_BUILDER, which `npm start` sets), the API does not wait for it: after the API listens the
 * builder is run as `<builder> <buildTarget> <image>` (a no-op when the image is current); while a missing image is
 * built the template is listed as `building` with the builder's output as its build log, and a create waits for it
 * (a failed build is that create's error).
 */
export interface BuiltinTemplateSpec extends BuiltinImageTemplate {
  /** The image from the configuration; '' = the template is not offered. */
  image(config: BuiltinTemplatesConfig): string;
  /** What the builder is asked to build (its first argument; a target of scripts/build-builtin-image.sh). */
  buildTarget: string;
}

/** The built-in templates built on demand. Another one is one more entry here and a target of the builder script. */
export const ON_DEMAND_TEMPLATES: BuiltinTemplateSpec[] = [
  {
    templateId: CODE_INTERPRETER_TEMPLATE_ID,
    alias: CODE_INTERPRETER_TEMPLATE_NAME,
    defaults: CODE_INTERPRETER_DEFAULTS,
    cpuCount: 2,
    memoryMB: 2048,
    imageSetting: 'TIDEPOOL_CODE_INTERPRETER_IMAGE',
    image: (config) => config.codeInterpreterImage,
    buildTarget: 'code-interpreter',
  },
];

/**
 * The built-in templates (`base`, and ON_DEMAND_TEMPLATES), registered from an engine that has their images: the
 * embedded node's at start (a missing base image stops the start), or for an engine-free API the first ready node
 * agent's, retried at every node sweep until it succeeds. Only the embedded node's engine gets images built.
 */
export class BuiltinTemplates {
  private registered = false;
  private readonly builds: BuiltinImageBuilds;

  constructor(
    private readonly templates: TemplateCatalog,
    private readonly config: BuiltinTemplatesConfig,
    private readonly logger: Logger,
    private readonly specs: BuiltinTemplateSpec[] = ON_DEMAND_TEMPLATES,
  ) {
    this.builds = new BuiltinImageBuilds(templates, config.builtinImageBuilder, logger);
  }

  /**
   * `buildImages`: this engine's images may be built by the builder (see startBuilds), when one is configured.
   * `ensure` first brings an image onto the node where it can (a node image in the cluster's registry is pulled there
   * on first use); an on-demand template's image failing to come leaves the base template registered.
   */
  async register(runtime: SandboxRuntime, options: { buildImages?: boolean; ensure?: (image: string) => Promise<void> } = {}): Promise<void> {
    const { buildImages = false, ensure } = options;
    await ensure?.(this.config.baseImage);
    await registerBaseTemplate(this.templates, runtime, this.config.baseImage, this.logger);
    for (const spec of this.specs) {
      const image = spec.image(this.config);
      if (buildImages && image !== '' && this.builds.enabled) {
        const exists = await runtime.imageExists(image);
        if (exists) await registerBuiltinFromImage(this.templates, runtime, spec, image, this.logger);
        else await this.templates.registerBuiltinBuilding(spec, `waiting for the API to listen; then its image '${image}' is built`);
        this.builds.plan(spec, image, runtime, exists);
        continue;
      }
      if (ensure && image !== '') {
        await ensure(image).catch((error: unknown) => this.logger.warn({ err: error, image, templateId: spec.templateId }, 'built-in template image not pulled onto the node'));
      }
      await registerBuiltinFromImage(this.templates, runtime, spec, image, this.logger);
    }
    this.registered = true;
  }

  /** Starts the planned image builds, one at a time (call once the API listens). */
  startBuilds(): void {
    this.builds.start();
  }

  /** Stops a build still running and waits for it to end (its template is built again at the next start). */
  stop(): Promise<void> {
    return this.builds.stop();
  }

  /** Registers once from a node's engine; a failure is logged and the next call tries again. */
  async registerOnce(runtime: SandboxRuntime, ensure?: (image: string) => Promise<void>): Promise<void> {
    if (this.registered) return;
    await this.register(runtime, { ensure }).catch((error: unknown) => this.logger.warn({ err: error }, 'built-in templates not registered from a node yet; retrying at the next node sweep'));
  }
}

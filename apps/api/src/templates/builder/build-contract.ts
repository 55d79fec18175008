/** What the build queue hands the builder and gets back. */
import type { BuildSpec, LogLevel, SandboxDefaults } from '../template-model.ts';

/** One build, as the builder sees it. */
export interface BuildJob {
  templateId: string;
  /** The building template's team: its uploads are the COPY steps' files; logs name it. */
  teamId: string;
  buildId: string;
  spec: BuildSpec;
  cpuCount: number;
  memoryMB: number;
  /** Set when `spec.fromTemplate`: the ready build it starts from. */
  baseTemplate: { image: string; defaults: SandboxDefaults } | null;
  /**
   * Images of the platform the build may name as `fromImage`: the ready builds of its team's templates and
   * snapshots and of the built-in templates (TemplateCatalog.imagesUsableBy). Other platform images are refused.
   */
  usableImages: string[];
}

/** Where build log entries go (`step`: `base`, `finalize` or a step index). */
export interface BuildReporter {
  log(level: LogLevel, message: string, step?: string): void;
}

export interface BuiltTemplate {
  /** Image reference sandboxes start from (`tidepool/template:<templateId>-<buildId>`). */
  image: string;
  envdVersion: string;
  defaults: SandboxDefaults;
  /**
   * Ids of every platform-made image the build made or reused (final, cache layers, runtime-injected
   * base); never a user's or the platform's own base image. See TemplateBuilder.removeBuildImages().
   */
  images: string[];
}

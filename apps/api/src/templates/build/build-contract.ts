/** What the build queue hands the builder and gets back. */
import type { BuildSpec, LogLevel, SandboxDefaults } from '../template-model.ts';

/** One build, as the builder sees it. */
export interface BuildJob {
  templateId: string;
  buildId: string;
  spec: BuildSpec;
  cpuCount: number;
  memoryMB: number;
  /** Set when `spec.fromTemplate`: the ready build it starts from. */
  baseTemplate: { image: string; defaults: SandboxDefaults } | null;
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

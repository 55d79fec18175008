/** What a step executor works with. */
import type { LogLevel } from '../template-model.ts';
import type { BuildStep } from '../template-model.ts';
import type { BuildState } from './build-state.ts';
import type { BuildWorkspace } from './build-workspace.ts';

export interface StepContext {
  step: BuildStep;
  /** `reason.step` of a failure in this step: its index as a string. */
  stepId: string;
  workspace: BuildWorkspace;
  state: BuildState;
  log(level: LogLevel, message: string): void;
  signal: AbortSignal;
}

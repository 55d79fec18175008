/** What the steps so far set up: the user, directory and environment later steps run with. */
import type { SandboxDefaults } from '../template-model.ts';
import { envListToRecord } from './env-expansion.ts';

/** Variables of the image's own Env that envd sets per user instead. */
const PER_USER = new Set(['HOME', 'USER', 'LOGNAME', 'HOSTNAME']);

export class BuildState {
  user: string;
  workdir: string | null;
  /** Set by `ENV` steps (and the base template): every sandbox gets them. */
  envs: Record<string, string>;
  /** The base image's own `Env` (e.g. `PYTHON_VERSION`), seen by `RUN` steps as in a Dockerfile. */
  private readonly imageEnv: Record<string, string>;

  constructor(start: SandboxDefaults, imageEnv: string[]) {
    this.user = start.user;
    this.workdir = start.workdir;
    this.envs = { ...start.envs };
    this.imageEnv = envListToRecord(imageEnv);
    for (const name of PER_USER) delete this.imageEnv[name];
  }

  lookup(name: string): string | undefined {
    return this.envs[name] ?? this.imageEnv[name];
  }

  /** Environment of a `RUN` step. */
  runEnv(): Record<string, string> {
    return { ...this.imageEnv, ...this.envs };
  }

  defaults(startCmd: string | null, readyCmd: string | null): SandboxDefaults {
    return { user: this.user, workdir: this.workdir, envs: { ...this.envs }, startCmd, readyCmd };
  }
}

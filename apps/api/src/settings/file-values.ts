/**
 * Settings that may come from a file: `<NAME>_FILE` names a file (a Swarm secret, a mounted Kubernetes Secret) whose
 * content stands for `<NAME>`. Both forms set, an unreadable or empty file: refused, naming the variable (never
 * echoing the content).
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './config-error.ts';
import type { Setting, SettingsEnv } from './setting.ts';

/** `env` with each of `settings` whose `<env>_FILE` is set given that file's content. */
export function withFileValues(env: SettingsEnv, settings: readonly Setting[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env };
  for (const { env: name, fromFile } of settings) {
    if (!fromFile) continue;
    const file = (env[`${name}_FILE`] ?? '').trim();
    if (file === '') continue;
    if ((env[name] ?? '').trim() !== '') throw new ConfigError(`invalid configuration:\n  ${name} and ${name}_FILE are both set: keep the value in one place`);
    let content: string;
    try {
      content = readFileSync(file, 'utf8');
    } catch (error) {
      throw new ConfigError(`invalid configuration:\n  ${name}_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    const lines = content.split(/\r?\n/).map((line) => line.trim());
    const value = fromFile.lines === 'lines' ? lines.filter(Boolean).join(',') : (lines[0] ?? '');
    if (value === '') throw new ConfigError(`invalid configuration:\n  ${name}_FILE: ${file} is empty (${fromFile.lines === 'lines' ? 'one key or comma list a line' : 'its first line is the value'})`);
    out[name] = value;
  }
  return out;
}

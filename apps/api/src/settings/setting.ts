/**
 * One environment setting as a feature declares it: the variable, its TypeBox type, how it is read, its default and
 * what it means. A feature's settings form a group; the top-level configuration composes the groups, validates them
 * once, and the configuration reference (docs/configuration.md) is written from the same declarations.
 */
import type { Static, TSchema } from '@sinclair/typebox';

export type SettingsEnv = Readonly<Record<string, string | undefined>>;

export interface Setting<T extends TSchema = TSchema> {
  /** The environment variable. */
  readonly env: string;
  /** An older name of the variable, read when `env` is unset. */
  readonly formerEnv?: string;
  readonly schema: T;
  /** The value from the environment, its default when unset, or what came in (for validation to name) when malformed. */
  readonly read: (env: SettingsEnv) => unknown;
  /** The default as the reference shows it (Markdown); computed defaults say how. */
  readonly default: string;
  /** What it does and its valid forms (Markdown, one line). */
  readonly description: string;
  /** The valid forms a wrong value's message ends with; derived from the schema when omitted. */
  readonly forms?: string;
  /** A wrong value is answered with this instead of the schema's wording. */
  readonly message?: string;
  /** Never echoed, not even a wrong value. */
  readonly secret?: boolean;
  /** The value may also come from the file named by `<env>_FILE` (a Swarm secret, a mounted Kubernetes Secret). */
  readonly fromFile?: {
    /** `first`: the file's first line; `lines`: every non-empty line, joined with commas. */
    readonly lines: 'first' | 'lines';
    readonly description: string;
  };
}

export function setting<T extends TSchema>(schema: T, declaration: Omit<Setting<T>, 'schema'>): Setting<T> {
  return { schema, ...declaration };
}

export type SettingMap = Record<string, Setting>;

/** A feature's settings under one title (a section of the reference). */
export interface SettingsGroup<S extends SettingMap = SettingMap> {
  readonly title: string;
  readonly settings: S;
}

export function settingsGroup<S extends SettingMap>(title: string, settings: S): SettingsGroup<S> {
  return { title, settings };
}

/** The values of a group once validated: its slice of the configuration. */
export type SettingsOf<G extends SettingsGroup> = { [K in keyof G['settings']]: Static<G['settings'][K]['schema']> };

/** The TypeBox properties of a group, to compose into one object schema. */
export function schemaProperties<S extends SettingMap>(group: SettingsGroup<S>): { [K in keyof S]: S[K]['schema'] } {
  return Object.fromEntries(Object.entries(group.settings).map(([key, declared]) => [key, declared.schema])) as { [K in keyof S]: S[K]['schema'] };
}

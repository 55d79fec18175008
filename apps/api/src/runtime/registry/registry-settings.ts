/**
 * The cluster's image registry (TIDEPOOL_REGISTRY=`host[:port][/path]`): where every image the platform makes is
 * pushed so any node can pull it. One naming scheme for all of them, `<host>[/<path>]/<kind>:<tag>`, with `kind`
 * one of a fixed set of repositories; a node pushes and pulls nothing else, so no caller can make it touch another
 * repository of the registry, let alone another registry. Credentials come from the process's own settings (a
 * password file), never from a call, and are never logged.
 */
import { readFileSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import { flag, text } from '../../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../../settings/setting.ts';

/** The repositories under the prefix: template builds, snapshots, disk-paused sandboxes, fork checkpoints. */
export const REGISTRY_KINDS = ['template', 'snapshot', 'sandbox', 'fork'] as const;
export type RegistryKind = (typeof REGISTRY_KINDS)[number];

const HOST = '(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]{1,5})?';
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REGISTRY_PATTERN = new RegExp(`^(${HOST})((?:/${PATH_COMPONENT})*)$`);
/** A tag as the engine accepts it. */
export const REGISTRY_TAG_PATTERN = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
/** A name under any prefix: `<kind>:<tag>` (what a push is asked for). */
export const REGISTRY_NAME_PATTERN = `^(?:${REGISTRY_KINDS.join('|')}):${REGISTRY_TAG_PATTERN}$`;

export interface RegistrySettings {
  /** `host[:port]` */
  host: string;
  /** `host[:port][/path]`: every pushed image is `<prefix>/<kind>:<tag>`. */
  prefix: string;
  username?: string;
  password?: string;
  /** The operator allows plain HTTP (the engine decides per its own insecure-registries list; checked at start). */
  insecure: boolean;
  /**
   * The node images of the settings (TIDEPOOL_BASE_IMAGE, TIDEPOOL_RUNTIME_IMAGE, TIDEPOOL_CODE_INTERPRETER_IMAGE)
   * that name this registry's host: a node lacking one pulls it on first use, exactly these names and no others.
   */
  nodeImages: string[];
}

export const registryEnvSettings = settingsGroup('Cluster: the image registry', {
  registry: setting(Type.String(), {
    env: 'TIDEPOOL_REGISTRY',
    read: (env) => text(env.TIDEPOOL_REGISTRY),
    default: 'unset (images stay on the node that made them)',
    description:
      'cluster images: `host[:port][/path]` of an OCI registry (no scheme; a host with a dot, a port or `localhost`). Set on the API and on every node agent (same value): template builds, snapshots and disk-paused sandboxes are pushed as `<registry>/template:<templateID>-<buildID>`, `<registry>/snapshot:<id>`, `<registry>/sandbox:<sandboxID>` and nodes pull what they lack ([Images across machines](cluster.md#images-across-machines-the-registry))',
  }),
  registryUsername: setting(Type.String({ maxLength: 255, pattern: '^[^\\x00-\\x20:]*$' }), {
    env: 'TIDEPOOL_REGISTRY_USERNAME',
    read: (env) => text(env.TIDEPOOL_REGISTRY_USERNAME),
    default: 'unset (anonymous)',
    description: 'the registry\'s user, with `TIDEPOOL_REGISTRY_PASSWORD_FILE` (both or neither)',
    forms: 'up to 255 characters without spaces, control characters or `:`',
  }),
  registryPasswordFile: setting(Type.String(), {
    env: 'TIDEPOOL_REGISTRY_PASSWORD_FILE',
    read: (env) => text(env.TIDEPOOL_REGISTRY_PASSWORD_FILE),
    default: 'unset (anonymous)',
    description: 'a file whose first line is the registry\'s password (with `TIDEPOOL_REGISTRY_USERNAME`); read once at start, never logged, never taken from a request',
  }),
  registryInsecure: setting(Type.Boolean(), {
    env: 'TIDEPOOL_REGISTRY_INSECURE',
    read: (env) => flag(env.TIDEPOOL_REGISTRY_INSECURE, false),
    default: '`off`',
    description:
      '`on` allows plain HTTP to the registry: a node whose engine lists the registry as insecure (it would speak HTTP) refuses to start without it; the API deletes tags over `http://` with it, `https://` without',
  }),
});

export type RegistryEnvSettings = SettingsOf<typeof registryEnvSettings>;

interface RegistryConfig {
  registry: string;
  registryUsername: string;
  registryPasswordFile: string;
  registryInsecure: boolean;
  baseImage?: string;
  runtimeImage?: string;
  codeInterpreterImage?: string;
}

/** What is wrong with the registry settings (one line naming the variable), or undefined. Reads no file. */
export function registrySettingsProblem(config: RegistryConfig): string | undefined {
  const example = 'registry.example.com:5000/tidepool';
  if (config.registry === '') {
    if (config.registryUsername || config.registryPasswordFile) return 'TIDEPOOL_REGISTRY_USERNAME / TIDEPOOL_REGISTRY_PASSWORD_FILE are set but TIDEPOOL_REGISTRY is not';
    return undefined;
  }
  const match = REGISTRY_PATTERN.exec(config.registry);
  if (!match) return `TIDEPOOL_REGISTRY: expected host[:port][/path] (e.g. ${example}; no scheme, lower-case path), got ${JSON.stringify(config.registry.slice(0, 200))}`;
  const host = match[1];
  // Without a dot, a port or `localhost` the engine reads the first component as a Docker Hub namespace.
  if (!host.includes('.') && !host.includes(':') && host !== 'localhost') return `TIDEPOOL_REGISTRY: the host ${JSON.stringify(host)} needs a dot, a port or to be localhost (else the engine takes it for a Docker Hub namespace)`;
  if (config.registry.length > 200) return 'TIDEPOOL_REGISTRY: at most 200 characters';
  if (Boolean(config.registryUsername) !== Boolean(config.registryPasswordFile)) return 'TIDEPOOL_REGISTRY_USERNAME and TIDEPOOL_REGISTRY_PASSWORD_FILE go together (or neither, for an anonymous registry)';
  return undefined;
}

/** The settings with the password read from its file (first line); undefined without a registry. Throws naming the variable. */
export function loadRegistrySettings(config: RegistryConfig): RegistrySettings | undefined {
  if (config.registry === '') return undefined;
  const match = REGISTRY_PATTERN.exec(config.registry)!;
  let password: string | undefined;
  if (config.registryPasswordFile) {
    let text: string;
    try {
      text = readFileSync(config.registryPasswordFile, 'utf8');
    } catch (error) {
      throw new Error(`TIDEPOOL_REGISTRY_PASSWORD_FILE: cannot read ${config.registryPasswordFile} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    password = text.split(/\r?\n/)[0] ?? '';
    if (password === '') throw new Error(`TIDEPOOL_REGISTRY_PASSWORD_FILE: ${config.registryPasswordFile} is empty (its first line is the password)`);
  }
  const host = match[1];
  const nodeImages = [config.baseImage, config.runtimeImage, config.codeInterpreterImage].filter((image): image is string => Boolean(image && image.startsWith(`${host}/`)));
  return {
    host,
    prefix: config.registry,
    ...(config.registryUsername ? { username: config.registryUsername, password } : {}),
    insecure: config.registryInsecure,
    nodeImages: [...new Set(nodeImages)],
  };
}

/** True when a node may pull `reference` from the registry: an image the platform made, or one of its node images. */
export function isPullable(settings: RegistrySettings, reference: string): boolean {
  return isUnderPrefix(settings.prefix, reference) || settings.nodeImages.includes(reference);
}

/** `<prefix>/<kind>:<tag>`; the tag is cut to what the engine accepts (ids are already tag-safe). */
export function registryReference(prefix: string, kind: RegistryKind, tag: string): string {
  return `${prefix}/${kind}:${tag.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128)}`;
}

/** True when `reference` is an image of the platform's own repositories under `prefix` (nothing else may be pulled). */
export function isUnderPrefix(prefix: string, reference: string): boolean {
  if (!reference.startsWith(`${prefix}/`)) return false;
  return new RegExp(REGISTRY_NAME_PATTERN).test(reference.slice(prefix.length + 1));
}

/** The `<kind>:<tag>` part of a reference under `prefix`, or undefined. */
export function nameUnderPrefix(prefix: string, reference: string): string | undefined {
  return isUnderPrefix(prefix, reference) ? reference.slice(prefix.length + 1) : undefined;
}

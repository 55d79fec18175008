/** The images of the built-in templates, and what template builds may use and take. */
import { Type } from '@sinclair/typebox';
import { integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

const DEFAULT_BASE_IMAGE = 'tidepool/base:latest';

/** `from=to,from2=to2` over `e2bdev/base` → the base image; a malformed entry is returned as it came for validation to name. */
export function parseImageAliases(raw: string | undefined, baseImage: string): Record<string, string> | string {
  const aliases: Record<string, string> = { 'e2bdev/base': baseImage };
  for (const entry of (raw ?? '').split(',').map((e) => e.trim()).filter(Boolean)) {
    const [from, to, ...rest] = entry.split('=');
    if (!from || !to || rest.length > 0) return entry;
    aliases[from.trim()] = to.trim();
  }
  return aliases;
}

export const templateSettings = settingsGroup('Templates and builds', {
  baseImage: setting(Type.String({ minLength: 1 }), {
    env: 'TIDEPOOL_BASE_IMAGE',
    read: (env) => env.TIDEPOOL_BASE_IMAGE || DEFAULT_BASE_IMAGE,
    default: `\`${DEFAULT_BASE_IMAGE}\``,
    description: 'the `base` template\'s image',
  }),
  runtimeImage: setting(Type.String({ minLength: 1 }), {
    env: 'TIDEPOOL_RUNTIME_IMAGE',
    read: (env) => text(env.TIDEPOOL_RUNTIME_IMAGE) || 'tidepool/envd-runtime:latest',
    default: '`tidepool/envd-runtime:latest`',
    description: 'the envd runtime carrier image template builds copy `/opt/tidepool` from (labelled with its runtime hash)',
  }),
  codeInterpreterImage: setting(Type.String(), {
    env: 'TIDEPOOL_CODE_INTERPRETER_IMAGE',
    read: (env) => (env.TIDEPOOL_CODE_INTERPRETER_IMAGE === undefined ? 'tidepool/code-interpreter:latest' : env.TIDEPOOL_CODE_INTERPRETER_IMAGE.trim()),
    default: '`tidepool/code-interpreter:latest`',
    description:
      'the `code-interpreter-v1` template\'s image (scripts/build-images.sh builds it); when it does not exist at start the template is not offered (creating it answers 404 saying how to build it) unless `TIDEPOOL_BUILTIN_IMAGE_BUILDER` builds it; empty = never offered',
  }),
  desktopImage: setting(Type.String(), {
    env: 'TIDEPOOL_DESKTOP_IMAGE',
    read: (env) => (env.TIDEPOOL_DESKTOP_IMAGE === undefined ? 'tidepool/desktop:latest' : env.TIDEPOOL_DESKTOP_IMAGE.trim()),
    default: '`tidepool/desktop:latest`',
    description:
      'the `desktop` template\'s image (`@e2b/desktop`); the API with an engine builds it from `docker/desktop` after it listens when it is missing or older than its sources (a desktop create waits for it meanwhile); empty = never offered',
  }),
  builtinImageBuilder: setting(Type.String({ pattern: '^(/.*)?$' }), {
    env: 'TIDEPOOL_BUILTIN_IMAGE_BUILDER',
    read: (env) => text(env.TIDEPOOL_BUILTIN_IMAGE_BUILDER),
    default: 'none (`npm start`: `scripts/build-builtin-image.sh`)',
    description:
      'absolute path of an executable the API runs as `<builder> <target> <image>` after it listens, one at a time, to build (or bring up to date) the images of built-in templates only some sandboxes need (`code-interpreter-v1`: target `code-interpreter`). While a missing image is built its template is listed as `building`, the builder\'s output is its build log, and a create of it waits; a failed build (non-zero exit, or no image left) is that create\'s 404 with the builder\'s last lines. Unset: such images must exist at start',
    forms: 'an absolute path, or empty',
  }),
  maxConcurrentBuilds: setting(Type.Integer({ minimum: 1, maximum: 64 }), {
    env: 'TIDEPOOL_MAX_CONCURRENT_BUILDS',
    read: (env) => integer(env.TIDEPOOL_MAX_CONCURRENT_BUILDS, 2),
    default: '2',
    description: 'template builds at once; later ones wait',
  }),
  maxQueuedBuilds: setting(Type.Integer({ minimum: 0, maximum: 10_000 }), {
    env: 'TIDEPOOL_MAX_QUEUED_BUILDS',
    read: (env) => integer(env.TIDEPOOL_MAX_QUEUED_BUILDS, 32),
    default: '32',
    description: 'builds that may wait for a free build slot; past it a new build is refused with 503 + `Retry-After: 10` (nothing registered)',
  }),
  maxUploadMB: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_MAX_UPLOAD_MB',
    read: (env) => integer(env.TIDEPOOL_MAX_UPLOAD_MB, 2048),
    default: '2048',
    description: 'largest COPY context archive a build may upload (MiB)',
  }),
  imageAliases: setting(Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 })), {
    env: 'TIDEPOOL_IMAGE_ALIASES',
    read: (env) => parseImageAliases(env.TIDEPOOL_IMAGE_ALIASES, env.TIDEPOOL_BASE_IMAGE || DEFAULT_BASE_IMAGE),
    default: '`e2bdev/base=<base image>`',
    description: '`from=to,…` applied to `fromImage` first',
    forms: 'a comma list of from=to image names',
  }),
  buildLocalImages: setting(Type.Array(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9._/:@*-]+$' })), {
    env: 'TIDEPOOL_BUILD_LOCAL_IMAGES',
    read: (env) => (env.TIDEPOOL_BUILD_LOCAL_IMAGES === undefined ? ['tidepool/*'] : env.TIDEPOOL_BUILD_LOCAL_IMAGES.split(',').map((p) => p.trim()).filter(Boolean)),
    default: '`tidepool/*`',
    description:
      'comma-separated patterns (`*` = any characters; no tag = any tag) of local images a build may start `fromImage`/`FROM` on, besides images this platform made (its label) or names (base, runtime, aliases\' targets, code-interpreter image); every other name is always pulled, with the build\'s `fromImageRegistry` credentials, and a failed pull fails the build; set empty for the platform\'s own images only',
    forms: 'a comma list of image name patterns (A-Za-z0-9._/:@- and *)',
  }),
  buildReadyTimeoutSeconds: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_BUILD_READY_TIMEOUT',
    read: (env) => integer(env.TIDEPOOL_BUILD_READY_TIMEOUT, 600),
    default: '600',
    description: 'seconds a build\'s readyCmd may take to succeed',
  }),
});

export type TemplateSettings = SettingsOf<typeof templateSettings>;

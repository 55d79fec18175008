/**
 * Where a build starts: a template's image (`fromTemplate`), or an image (`fromImage`, the
 * platform's base when neither is given). base-image-policy.ts decides: a local image is used only when the platform
 * knows its name, it is on the operator's allowlist, or (one the platform made) the catalog maps it to the building
 * team; a platform image of another team is refused; any other name is always pulled.
 * The start image always carries the current envd runtime (added when missing).
 */
import type { ImageEngine, ImageInfo, RegistryLogin } from '../../runtime/image-engine.ts';
import { BASE_DEFAULTS, type BuildSpec, type RegistryCredentials, type SandboxDefaults } from '../template-model.ts';
import { BuildFailure } from './build-failure.ts';
import { ENVD_VERSION_LABEL, RUNTIME_HASH_LABEL } from '../../runtime/docker/docker-labels.ts';
import { chooseBaseImage, LOCAL_IMAGES_SETTING, type LocalImagePolicy } from './base-image-policy.ts';
import { applyImageAlias, parseImageRef, pullableRef } from './image-ref.ts';
import { carriesRuntime, type EnvdRuntime, injectRuntime, type InjectionContext } from './runtime-injection.ts';

export const BASE_STEP = 'base';

export interface BaseRequest {
  spec: BuildSpec;
  baseTemplate: { image: string; defaults: SandboxDefaults } | null;
  /** Image of builds that name no base. */
  platformBaseImage: string;
  imageAliases: Record<string, string>;
  runtimeImage: string;
  localImages: LocalImagePolicy;
  /** Platform images the building team may name as fromImage (BuildJob.usableImages). */
  usableImages: readonly string[];
}

export interface PreparedBase {
  /** The image the first step runs on (with the current runtime). */
  image: ImageInfo;
  /** Id of the image as named, before the runtime was added: the cache key. */
  originalId: string;
  defaults: SandboxDefaults;
  runtime: EnvdRuntime;
  /** The runtime was added by this build (tag to drop if the build fails). */
  madeTag: string | undefined;
  /** Images of the platform the build stands on (a cached runtime-injected base). */
  platformImages: string[];
}

function fail(message: string): never {
  throw new BuildFailure(message, BASE_STEP);
}

export async function loadRuntime(engine: ImageEngine, runtimeImage: string, signal: AbortSignal): Promise<EnvdRuntime> {
  const image = await engine.inspectImage(runtimeImage, signal);
  if (!image) fail(`the envd runtime image '${runtimeImage}' does not exist; build it with 'bash scripts/build-images.sh'`);
  const hash = image.config.labels[RUNTIME_HASH_LABEL];
  if (!hash) fail(`the envd runtime image '${runtimeImage}' has no ${RUNTIME_HASH_LABEL} label`);
  return { image, hash, envdVersion: image.config.labels[ENVD_VERSION_LABEL] ?? 'unknown' };
}

function loginFor(ref: string, credentials: RegistryCredentials | null): RegistryLogin | undefined {
  if (!credentials) return undefined;
  if (credentials.type !== 'registry') {
    fail(`fromImageRegistry of type '${credentials.type}' is not supported by this platform: use type 'registry' with a username and password`);
  }
  return { username: credentials.username, password: credentials.password, server: parseImageRef(ref).registry };
}

async function findOrPull(ctx: InjectionContext, ref: string, credentials: RegistryCredentials | null, request: BaseRequest): Promise<ImageInfo> {
  const { engine, signal } = ctx;
  const local = await engine.inspectImage(ref, signal);
  const choice = chooseBaseImage(ref, local, request.localImages, request.usableImages);
  if (choice.kind === 'refused') fail(choice.reason);
  if (choice.kind === 'local' && local) return local;
  const login = loginFor(ref, credentials);
  const pullRef = pullableRef(ref);
  ctx.log('info', `Pulling ${pullRef}${login ? ` as ${login.username}` : ''}`);
  try {
    await engine.pullImage(pullRef, login, (line) => ctx.log('info', line), signal);
  } catch (error) {
    if (signal.aborted) throw error;
    // The same words whether or not an image of that name is on the engine: a refusal must not tell which exist.
    const reason = error instanceof Error ? error.message : String(error);
    fail(`the base image '${ref}' could not be pulled (${reason}); local images serve a build only if this platform made them or they match ${LOCAL_IMAGES_SETTING}`);
  }
  return (await engine.inspectImage(pullRef, signal)) ?? fail(`the base image '${ref}' was pulled but cannot be found`);
}

export async function prepareBase(ctx: InjectionContext, request: BaseRequest): Promise<PreparedBase> {
  const { spec } = request;
  let named: string;
  let defaults: SandboxDefaults;
  let image: ImageInfo;
  if (spec.fromTemplate !== null) {
    if (!request.baseTemplate) fail(`the template '${spec.fromTemplate}' has no ready build to start from`);
    named = request.baseTemplate.image;
    defaults = request.baseTemplate.defaults;
    image = (await ctx.engine.inspectImage(named, ctx.signal)) ?? fail(`the image of template '${spec.fromTemplate}' (${named}) no longer exists; rebuild that template`);
    ctx.log('info', `FROM template ${spec.fromTemplate}`);
  } else {
    const wanted = spec.fromImage ?? request.platformBaseImage;
    named = applyImageAlias(wanted, request.imageAliases);
    defaults = BASE_DEFAULTS;
    ctx.log('info', `FROM ${wanted}${named !== wanted ? ` (${named})` : ''}`);
    image = await findOrPull(ctx, named, spec.fromImageRegistry, request);
  }
  const runtime = await loadRuntime(ctx.engine, request.runtimeImage, ctx.signal);
  if (carriesRuntime(image, runtime)) return { image, originalId: image.id, defaults, runtime, madeTag: undefined, platformImages: [] };
  const injected = await injectRuntime(ctx, image, named, runtime);
  return { image: injected.image, originalId: image.id, defaults, runtime, madeTag: injected.madeTag, platformImages: [injected.image.id] };
}

/**
 * Base images without the current envd runtime get it: `/opt/tidepool` copied in from the runtime
 * image, then `envd provision` (creates the user `user`, links a shell, …) run inside, then
 * committed. The result is cached per (base image, runtime).
 */
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import type { ImageEngine, ImageInfo } from '../../runtime/image-engine.ts';
import type { LogLevel } from '../template-model.ts';
import { BuildFailure } from './build-failure.ts';
import { ENVD_VERSION_LABEL, LAYER_LABELS, RUNTIME_HASH_LABEL } from '../../runtime/docker/docker-labels.ts';
import { ENVD_COMMAND } from './build-workspace.ts';
import { layerTag, runtimeInjectionHash } from './chain-hash.ts';

export interface EnvdRuntime {
  /** Image holding nothing but /opt/tidepool. */
  image: ImageInfo;
  hash: string;
  envdVersion: string;
}

export interface InjectionContext {
  engine: ImageEngine;
  /** Labels of the containers it creates. */
  labels: Record<string, string>;
  namePrefix: string;
  /** Keeps the caches of platforms sharing an engine apart. */
  cacheScope: string;
  log(level: LogLevel, message: string): void;
  signal: AbortSignal;
}

export interface InjectedBase {
  image: ImageInfo;
  /** The tag was created by this build (cleaned up if the build fails). */
  madeTag: string | undefined;
}

const PROVISION_TIMEOUT_MS = 5 * 60_000;
/** What a runtime from before `envd provision` existed answers. */
const NO_PROVISION = /unexpected argument 'provision'/;

export function carriesRuntime(image: ImageInfo, runtime: EnvdRuntime): boolean {
  return image.config.labels[RUNTIME_HASH_LABEL] === runtime.hash;
}

export async function injectRuntime(ctx: InjectionContext, base: ImageInfo, baseName: string, runtime: EnvdRuntime): Promise<InjectedBase> {
  const { engine, signal } = ctx;
  const tag = layerTag(runtimeInjectionHash(base.id, runtime.hash, ctx.cacheScope));
  const cached = await engine.inspectImage(tag, signal);
  if (cached) {
    ctx.log('info', `CACHED envd runtime ${runtime.envdVersion} in ${baseName}`);
    return { image: cached, madeTag: undefined };
  }
  ctx.log('info', `Adding the envd runtime ${runtime.envdVersion} to ${baseName}`);
  const containers: string[] = [];
  try {
    const target = await engine.createContainer(
      { image: base.id, name: `${ctx.namePrefix}-runtime`, labels: ctx.labels, entrypoint: ['/opt/tidepool/bin/envd'], cmd: ['provision'], user: '0:0', cpuCount: 1, memoryMB: 512, network: false },
      signal,
    );
    containers.push(target);
    const source = await engine.createContainer(
      { image: runtime.image.id, name: `${ctx.namePrefix}-runtime-source`, labels: ctx.labels, entrypoint: ['/opt/tidepool/bin/envd'], cmd: [], user: '0:0', cpuCount: 1, memoryMB: 64, network: false },
      signal,
    );
    containers.push(source);
    if (!(await engine.statPath(target, '/opt', signal)).exists) await engine.writeArchive(target, '/', optDirectory(), signal);
    await engine.writeArchive(target, '/opt', await engine.readArchive(source, '/opt/tidepool', signal), signal);
    await engine.startContainer(target, signal);
    const exit = await engine.waitForExit(target, PROVISION_TIMEOUT_MS, signal);
    const output = exit.output.trim();
    if (exit.exitCode === 0) {
      for (const line of output.split('\n').filter(Boolean)) ctx.log('info', line);
    } else if (NO_PROVISION.test(output)) {
      ctx.log('debug', 'this envd runtime has no provisioning step; using the image as it is');
    } else {
      throw new BuildFailure(
        `the envd runtime cannot prepare the image '${baseName}' (envd provision exited with code ${exit.exitCode}): ${output.split('\n').slice(-5).join(' | ') || 'no output'}`,
        'base',
      );
    }
    const id = await engine.commit(
      target,
      {
        labels: { ...LAYER_LABELS, [RUNTIME_HASH_LABEL]: runtime.hash, [ENVD_VERSION_LABEL]: runtime.envdVersion },
        config: { ...ENVD_COMMAND, user: '0:0' },
      },
      signal,
    );
    await engine.tagImage(id, tag, signal);
    const image = await engine.inspectImage(id, signal);
    if (!image) throw new Error(`the engine lost the image it just committed (${id})`);
    return { image, madeTag: tag };
  } finally {
    for (const id of containers) await engine.removeContainer(id).catch(() => undefined);
  }
}

function optDirectory(): Readable {
  const pack = tar.pack();
  pack.entry({ name: 'opt', type: 'directory', mode: 0o755, uid: 0, gid: 0, mtime: new Date() });
  pack.finalize();
  return pack as unknown as Readable;
}

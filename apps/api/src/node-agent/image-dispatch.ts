/**
 * The agent's side of the image-engine table (nodes/image-rpc-methods.ts): checks a call, makes sure a container it
 * names is one of this platform's build containers (its label), runs it on the node's image engine and shapes the
 * result for the wire. The two streams (a tar in, a tar out) are served by agent-server.ts with the same checks.
 */
import type { Readable } from 'node:stream';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import { CONTAINER_METHODS, IMAGE_METHODS, isImageMethod } from '../nodes/image-rpc-methods.ts';
import { schemaProblem } from '../nodes/node-rpc-methods.ts';
import type { ImageEngine, RegistryLogin } from '../runtime/image-engine.ts';
import { BUILD_ROLE_LABEL } from '../runtime/docker/docker-labels.ts';

const badCall = (message: string): NodeChannelError => new NodeChannelError('bad_call', message);
const MAX_PROGRESS_LINES = 200;

/** Checks an image call's method and arguments; returns the arguments (a bad_call NodeChannelError otherwise). */
export function checkImageCall(method: string, body: unknown): unknown[] {
  if (!isImageMethod(method)) throw badCall(`unknown image method ${JSON.stringify(method.slice(0, 64))}`);
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !Array.isArray((body as { args?: unknown }).args) || Object.keys(body).length !== 1) {
    throw badCall(`${method}: the body must be {"args": [...]}`);
  }
  const args = (body as { args: unknown[] }).args;
  const problem = schemaProblem(IMAGE_METHODS[method].args, args);
  if (problem) throw badCall(`${method}: invalid arguments (${problem})`);
  return args;
}

/** A container a call names must be a build container of this platform (the engine lists by the platform label). */
export async function requireBuildContainer(engine: ImageEngine, containerId: string): Promise<void> {
  const builds = await engine.listContainers({ [BUILD_ROLE_LABEL]: 'container' });
  if (!builds.some((id) => id === containerId || id.startsWith(containerId))) throw badCall(`container ${JSON.stringify(containerId.slice(0, 64))} is not a build container of this platform`);
}

/** Runs a checked call (readArchive excepted: a stream); the result as a JSON-ready value. */
export async function runImageCall(engine: ImageEngine, method: string, args: unknown[]): Promise<unknown> {
  if (CONTAINER_METHODS.has(method)) await requireBuildContainer(engine, args[0] as string);
  switch (method) {
    case 'inspectImage':
      return (await engine.inspectImage(args[0] as string)) ?? null;
    case 'pullImage': {
      const lines: string[] = [];
      await engine.pullImage(args[0] as string, (args[1] as RegistryLogin | null) ?? undefined, (line) => {
        lines.push(line.slice(0, 1024));
        if (lines.length > MAX_PROGRESS_LINES) lines.shift();
      });
      return lines;
    }
    case 'readFile': {
      const bytes = await engine.readFile(args[0] as string, args[1] as string);
      return bytes === undefined ? null : bytes.toString('base64');
    }
    case 'containerAddress':
      return (await engine.containerAddress(args[0] as string)) ?? null;
    default: {
      const fn = (engine as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method];
      const result = await fn.apply(engine, args);
      return result === undefined ? null : result;
    }
  }
}

/** The tar of a path of a build container (checked like a call). */
export async function readBuildArchive(engine: ImageEngine, args: unknown[]): Promise<Readable> {
  await requireBuildContainer(engine, args[0] as string);
  return engine.readArchive(args[0] as string, args[1] as string);
}

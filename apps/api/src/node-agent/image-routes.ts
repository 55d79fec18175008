/**
 * The agent's HTTP side of template builds on this node (`/v1/image/…`, see nodes/image-rpc-methods.ts): calls,
 * the tar stream into a build container, the tar stream out of one, and the addresses of build containers the
 * agent's tunnel may reach (the API talks to a build container's envd through it).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { encodeError, NodeChannelError } from '../nodes/node-channel-errors.ts';
import { ContainerPath } from '../nodes/image-rpc-methods.ts';
import { schemaProblem } from '../nodes/node-rpc-methods.ts';
import type { ImageEngine } from '../runtime/image-engine.ts';
import { BUILD_ROLE_LABEL } from '../runtime/docker/docker-labels.ts';
import { sendJson } from './agent-responses.ts';
import { checkImageCall, readBuildArchive, requireBuildContainer, runImageCall } from './image-dispatch.ts';
import { type AgentPolicy, PolicyRefusal } from './agent-policy.ts';
import type { AgentMetrics } from './agent-metrics.ts';

/** The node's policy and metrics for image calls; `refuse` answers a call the policy refused. */
export interface ImageCallGuard {
  policy?: AgentPolicy;
  metrics?: AgentMetrics;
  refuse(error: PolicyRefusal): void;
}

const CONTAINER_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

function statusOf(error: unknown): number {
  return error instanceof NodeChannelError && error.code === 'bad_call' ? 400 : 500;
}

export async function serveImageCall(images: ImageEngine, method: string, body: unknown, response: ServerResponse, logger: Logger, guard?: ImageCallGuard): Promise<void> {
  let args: unknown[];
  try {
    args = checkImageCall(method, body);
  } catch (error) {
    logger.warn({ method: method.slice(0, 64), reason: (error as Error).message }, 'refused a malformed image call');
    guard?.metrics?.protocolError('bad_call');
    return sendJson(response, 400, { error: encodeError(error) });
  }
  const started = Date.now();
  try {
    await guard?.policy?.checkImageCall(method, args);
  } catch (error) {
    if (error instanceof PolicyRefusal) return guard!.refuse(error);
    logger.warn({ method, err: error }, 'image call failed');
    return sendJson(response, statusOf(error), { error: encodeError(error) });
  }
  try {
    if (method === 'readArchive') {
      const archive = await readBuildArchive(images, args);
      response.writeHead(200, { 'content-type': 'application/x-tar' });
      archive.on('error', (error: Error) => {
        logger.warn({ err: error }, 'build archive stream failed');
        response.destroy(error);
      });
      archive.pipe(response);
      return;
    }
    const result = await runImageCall(images, method, args);
    guard?.metrics?.engineCall(`image.${method}`, 'success', (Date.now() - started) / 1000);
    logger.debug({ method, ms: Date.now() - started }, 'image call');
    sendJson(response, 200, { result });
  } catch (error) {
    guard?.metrics?.engineCall(`image.${method}`, 'error', (Date.now() - started) / 1000);
    logger.warn({ method, ms: Date.now() - started, err: error }, 'image call failed');
    sendJson(response, statusOf(error), { error: encodeError(error) });
  }
}

/** `POST /v1/image/writeArchive?container=<id>&directory=<path>` with the tar as the body. */
export async function serveWriteArchive(images: ImageEngine, request: IncomingMessage, response: ServerResponse, logger: Logger): Promise<void> {
  const query = new URL(request.url ?? '', 'https://agent').searchParams;
  const container = query.get('container') ?? '';
  const directory = query.get('directory') ?? '';
  try {
    if (!CONTAINER_PATTERN.test(container)) throw new NodeChannelError('bad_call', 'writeArchive: container must be a container id');
    const problem = schemaProblem(ContainerPath, directory);
    if (problem) throw new NodeChannelError('bad_call', `writeArchive: directory must be an absolute clean path (${problem})`);
    await requireBuildContainer(images, container);
    await images.writeArchive(container, directory, request);
    sendJson(response, 200, { result: null });
  } catch (error) {
    request.resume();
    logger.warn({ container: container.slice(0, 64), err: error }, 'writeArchive failed');
    sendJson(response, statusOf(error), { error: encodeError(error) });
  }
}

/** Addresses of the running build containers of this platform on the node. */
export async function buildContainerAddresses(images: ImageEngine): Promise<string[]> {
  const ids = await images.listContainers({ [BUILD_ROLE_LABEL]: 'container' });
  const addresses = await Promise.all(ids.map((id) => images.containerAddress(id).catch(() => undefined)));
  return addresses.filter((a): a is string => typeof a === 'string');
}

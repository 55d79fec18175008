/**
 * A node agent's volumes as the API reaches them: directory calls over the node channel (answers checked against the
 * call table) and content requests streamed to the agent and back (the API has checked the volume's token; the agent
 * trusts only its mutual-TLS client). The volume's id and operation are rebuilt from the route, never copied from
 * the client's URL; of the client's headers only the body's type and length travel.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { NodeVolumes } from '../volumes/node-volumes.ts';
import type { NodeChannel } from './node-channel-client.ts';
import { decodeError } from './node-channel-errors.ts';
import { schemaProblem, VOLUME_CONTENT_OPS, VOLUME_METHODS, type VolumeMethodName } from './node-rpc-methods.ts';

const CALL_DEADLINE_MS = 30_000;
/** A forwarded content request or its answer may be silent this long (a large upload is written meanwhile). */
const CONTENT_IDLE_MS = 120_000;
const FORWARDED_REQUEST_HEADERS = ['content-type', 'content-length', 'transfer-encoding'];
const FORWARDED_ANSWER_HEADERS = ['content-type', 'content-length'];

export function remoteVolumes(channel: NodeChannel): NodeVolumes {
  const call = async (method: VolumeMethodName, volumeID: string): Promise<unknown> => {
    const what = `volumes/${method}`;
    const { status, value } = await channel.json('POST', `/v1/volumes/${method}`, { args: [volumeID] }, CALL_DEADLINE_MS, what);
    if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, channel.nodeId);
    if (status !== 200 || typeof value !== 'object' || value === null || !('result' in value)) throw channel.fail('protocol', `${what}: answered HTTP ${status} without a result`);
    const result = (value as { result: unknown }).result;
    const problem = schemaProblem(VOLUME_METHODS[method].result, result);
    if (problem) throw channel.fail('protocol', `${what}: answered a result of the wrong shape (${problem})`);
    return result;
  };
  return {
    create: async (volumeID) => {
      await call('create', volumeID);
    },
    remove: async (volumeID) => {
      await call('remove', volumeID);
    },
    hostDir: async (volumeID) => (await call('hostDir', volumeID)) as string,
    forwardContent: (request, response, volumeID) => forwardContent(channel, request, response, volumeID),
  };
}

/** Answers a content request the agent could not be asked (the content API's error shape). */
function answerUnreachable(response: ServerResponse, nodeId: string, reason: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  const body = JSON.stringify({ code: '502', message: `the volume's node "${nodeId}" did not answer: ${reason}` });
  response.writeHead(502, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

function forwardContent(channel: NodeChannel, request: IncomingMessage, response: ServerResponse, volumeID: string): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://volume');
  const op = url.pathname.split('/').pop() as (typeof VOLUME_CONTENT_OPS)[number];
  return new Promise((resolve) => {
    if (!VOLUME_CONTENT_OPS.includes(op)) {
      answerUnreachable(response, channel.nodeId, 'unknown content operation');
      resolve();
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const upstream = httpsRequest({
      agent: channel.agent,
      protocol: 'https:',
      hostname: channel.base.hostname.replace(/^\[|\]$/g, ''),
      port: channel.base.port || 443,
      method: request.method,
      path: `/v1/volumecontent/${volumeID}/${op}${url.search}`,
      headers,
    });
    upstream.setTimeout(CONTENT_IDLE_MS, () => upstream.destroy(new Error(`no traffic for ${CONTENT_IDLE_MS / 1000} s`)));
    upstream.once('response', (answer) => {
      const answerHeaders: Record<string, string> = {};
      for (const name of FORWARDED_ANSWER_HEADERS) {
        const value = answer.headers[name];
        if (typeof value === 'string') answerHeaders[name] = value;
      }
      response.writeHead(answer.statusCode ?? 502, answerHeaders);
      answer.pipe(response);
      answer.once('error', () => response.destroy());
      answer.once('aborted', () => response.destroy());
    });
    upstream.once('error', (error) => {
      answerUnreachable(response, channel.nodeId, error.message);
      request.unpipe(upstream);
      request.resume();
    });
    // A client that goes away mid-upload or mid-download takes the forwarded request with it.
    response.once('close', () => {
      if (!response.writableFinished) upstream.destroy();
      resolve();
    });
    request.pipe(upstream);
  });
}

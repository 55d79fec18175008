import { type Client, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-web';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { Filesystem } from '@tidepool/protocol/filesystem';
import { Process } from '@tidepool/protocol/process';

/** The sandbox user the terminal and the files browser act as. */
export const SANDBOX_USER = 'user';

export interface EnvdTarget {
  sandboxID: string;
  envdAccessToken?: string | null;
}

/** What every envd request carries: routing to the sandbox through this origin, and envd's own token. */
export function envdHeaders(target: EnvdTarget): Record<string, string> {
  const headers: Record<string, string> = { 'E2b-Sandbox-Id': target.sandboxID, 'E2b-Sandbox-Port': String(ENVD_PORT) };
  if (target.envdAccessToken) headers['X-Access-Token'] = target.envdAccessToken;
  return headers;
}

/** `Authorization: Basic base64("<user>:")`: the user a process or file operation runs as. */
export function userHeader(user = SANDBOX_USER): Record<string, string> {
  return { Authorization: `Basic ${btoa(`${user}:`)}` };
}

export interface EnvdClients {
  process: Client<typeof Process>;
  filesystem: Client<typeof Filesystem>;
}

/** Connect (JSON) clients for one sandbox's envd, through the platform proxy on this same origin. */
export function envdClients(target: EnvdTarget): EnvdClients {
  const routing: Interceptor = (next) => async (req) => {
    for (const [name, value] of Object.entries(envdHeaders(target))) req.header.set(name, value);
    return next(req);
  };
  const transport = createConnectTransport({ baseUrl: window.location.origin, useBinaryFormat: false, interceptors: [routing] });
  return { process: createClient(Process, transport), filesystem: createClient(Filesystem, transport) };
}

async function failure(response: Response): Promise<Error> {
  const text = await response.text();
  try {
    const body = JSON.parse(text) as { message?: string };
    if (body.message) return new Error(`${response.status}: ${body.message}`);
  } catch {
    // not JSON
  }
  return new Error(`${response.status}: ${text || response.statusText}`);
}

/** `GET /files?path=`: a file's bytes. */
export async function downloadFile(target: EnvdTarget, path: string): Promise<Blob> {
  const query = new URLSearchParams({ path, username: SANDBOX_USER });
  const response = await fetch(`/files?${query}`, { headers: envdHeaders(target) });
  if (!response.ok) throw await failure(response);
  return response.blob();
}

/** `POST /files?path=` as multipart (every envd version takes it); parents are created, a file is replaced. */
export async function uploadFile(target: EnvdTarget, path: string, file: Blob): Promise<void> {
  const form = new FormData();
  form.append('file', file, path);
  const query = new URLSearchParams({ path, username: SANDBOX_USER });
  const response = await fetch(`/files?${query}`, { method: 'POST', headers: envdHeaders(target), body: form });
  if (!response.ok) throw await failure(response);
}

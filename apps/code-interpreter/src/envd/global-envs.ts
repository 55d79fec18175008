import { get } from 'node:http';
import type { Logger } from 'pino';

/** Largest `/envs` answer read (the variables a sandbox was created with are far smaller). */
const MAX_ENVS_BYTES = 1024 * 1024;

/**
 * The sandbox's global environment variables, as envd's `GET /envs` gives them (the variables the sandbox was
 * created with). Needs the envd access token the client sends with `/execute`. Never throws: a failure is
 * logged and means no variables (the execution still runs). Asked with node:http, which the server has loaded
 * already: the first `fetch()` of a process loads its HTTP client first, and the first execution of a new sandbox
 * (create → first runCode) would wait for that.
 */
export async function fetchGlobalEnvs(envdUrl: string, accessToken: string | undefined, logger: Logger, timeoutMs = 3000): Promise<Record<string, string>> {
  try {
    const { status, body } = await getText(`${envdUrl}/envs`, accessToken ? { 'x-access-token': accessToken } : {}, timeoutMs);
    if (status !== 200) {
      logger.warn({ status }, 'envd /envs refused: the global environment variables are not applied');
      return {};
    }
    const parsed: unknown = JSON.parse(body);
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    const envs: Record<string, string> = {};
    for (const [key, value] of Object.entries(parsed)) if (typeof value === 'string') envs[key] = value;
    return envs;
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'envd /envs failed: the global environment variables are not applied');
    return {};
  }
}

function getText(url: string, headers: Record<string, string>, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers, timeout: timeoutMs }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ENVS_BYTES) request.destroy(new Error(`the answer is larger than ${MAX_ENVS_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', reject);
  });
}

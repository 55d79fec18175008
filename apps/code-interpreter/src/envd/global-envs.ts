import type { Logger } from 'pino';

/**
 * The sandbox's global environment variables, as envd's `GET /envs` gives them (the variables the sandbox was
 * created with). Needs the envd access token the client sends with `/execute`. Never throws: a failure is
 * logged and means no variables (the execution still runs).
 */
export async function fetchGlobalEnvs(envdUrl: string, accessToken: string | undefined, logger: Logger, timeoutMs = 3000): Promise<Record<string, string>> {
  try {
    const response = await fetch(`${envdUrl}/envs`, {
      headers: accessToken ? { 'x-access-token': accessToken } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) {
      logger.warn({ status: response.status }, 'envd /envs refused: the global environment variables are not applied');
      return {};
    }
    const body: unknown = await response.json();
    if (!body || typeof body !== 'object' || Array.isArray(body)) return {};
    const envs: Record<string, string> = {};
    for (const [key, value] of Object.entries(body)) if (typeof value === 'string') envs[key] = value;
    return envs;
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'envd /envs failed: the global environment variables are not applied');
    return {};
  }
}

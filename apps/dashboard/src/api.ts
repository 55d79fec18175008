/** The platform REST API, same origin, with the API key from this browser tab's session. */
const KEY_ITEM = 'tidepool.apiKey';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY_ITEM);
}

export function setApiKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY_ITEM);
  else sessionStorage.setItem(KEY_ITEM, key);
}

/** Called when the platform refuses the key, so the page can go back to sign-in. */
let onUnauthorized: (message: string) => void = () => undefined;
export function whenUnauthorized(handler: (message: string) => void): void {
  onUnauthorized = handler;
}

export async function request<T = unknown>(method: string, path: string, body?: unknown, key = apiKey()): Promise<T> {
  return (await exchange<T>(method, path, body, key)).body;
}

/** The answer with its headers (`x-next-token` paging). */
async function exchange<T>(method: string, path: string, body?: unknown, key = apiKey()): Promise<{ body: T; headers: Headers }> {
  const headers: Record<string, string> = { 'x-api-key': key ?? '' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  if (!response.ok) {
    const message = typeof parsed === 'object' && parsed !== null && 'message' in parsed ? String((parsed as { message: unknown }).message) : text || response.statusText;
    if (response.status === 401 && key === apiKey()) onUnauthorized(message);
    throw new ApiError(response.status, `${response.status}: ${message}`);
  }
  return { body: parsed as T, headers: response.headers };
}

export interface ListedSandbox {
  sandboxID: string;
  templateID: string;
  alias?: string;
  startedAt: string;
  endAt: string;
  state: 'running' | 'paused';
  cpuCount: number;
  memoryMB: number;
  metadata: Record<string, string>;
  envdVersion: string;
}

export interface SandboxDetail extends ListedSandbox {
  envdAccessToken?: string | null;
  trafficAccessToken?: string | null;
  domain: string | null;
}

export interface MetricSample {
  timestamp: string;
  cpuUsedPct: number;
  cpuCount: number;
  memUsed: number;
  memTotal: number;
  diskUsed: number;
  diskTotal: number;
}

export interface SandboxLogEntry {
  timestamp: string;
  level: string;
  message: string;
}

export interface Template {
  templateID: string;
  buildID: string;
  aliases: string[];
  names?: string[];
  cpuCount: number;
  memoryMB: number;
  createdAt: string;
  updatedAt: string;
  buildStatus: string;
  buildCount: number;
  spawnCount: number;
}

export interface TemplateBuild {
  buildID: string;
  status: string;
  createdAt: string;
  finishedAt?: string;
}

export interface BuildLogEntry {
  timestamp: string;
  level: string;
  message: string;
  step?: string;
}

export interface BuildStatus {
  status: string;
  logEntries: BuildLogEntry[];
  reason?: { message: string; step?: string };
}

/** `metadata=` as the platform decodes it: form data whose keys and values are encoded once more. */
export function metadataQuery(filter: Record<string, string>): string {
  const form = Object.entries(filter)
    .map(([k, v]) => `${encodeURIComponent(encodeURIComponent(k))}=${encodeURIComponent(encodeURIComponent(v))}`)
    .join('&');
  return encodeURIComponent(form);
}

export const sandboxes = {
  /** Every matching sandbox, newest first (pages of 100 followed through `x-next-token`, at most 2000). */
  list: async (states: string[], metadata: Record<string, string>) => {
    const query = [`state=${states.join(',')}`, 'limit=100'];
    if (Object.keys(metadata).length > 0) query.push(`metadata=${metadataQuery(metadata)}`);
    const all: ListedSandbox[] = [];
    let next: string | null = null;
    do {
      const page: { body: ListedSandbox[]; headers: Headers } = await exchange<ListedSandbox[]>('GET', `/v2/sandboxes?${query.join('&')}${next ? `&nextToken=${encodeURIComponent(next)}` : ''}`);
      all.push(...page.body);
      next = page.headers.get('x-next-token');
    } while (next && all.length < 2000);
    return all;
  },
  get: (id: string) => request<SandboxDetail>('GET', `/sandboxes/${encodeURIComponent(id)}`),
  create: (body: { templateID: string; timeout?: number; metadata?: Record<string, string> }) => request<{ sandboxID: string }>('POST', '/v2/sandboxes', body),
  kill: (id: string) => request('DELETE', `/sandboxes/${encodeURIComponent(id)}`),
  pause: (id: string) => request('POST', `/sandboxes/${encodeURIComponent(id)}/pause`, {}),
  resume: (id: string, timeout: number) => request('POST', `/v2/sandboxes/${encodeURIComponent(id)}/connect`, { timeout }),
  extend: (id: string, timeout: number) => request('POST', `/sandboxes/${encodeURIComponent(id)}/timeout`, { timeout }),
  snapshot: (id: string) => request<{ snapshotID: string; names?: string[] }>('POST', `/sandboxes/${encodeURIComponent(id)}/snapshots`, {}),
  metrics: (id: string, startSeconds: number) => request<MetricSample[]>('GET', `/sandboxes/${encodeURIComponent(id)}/metrics?start=${startSeconds}`),
  logs: (id: string) => request<{ logEntries: SandboxLogEntry[] }>('GET', `/sandboxes/${encodeURIComponent(id)}/logs?limit=1000`),
};

/** What the dashboard needs to know about the platform (open; `GET /dashboard/platform.json`), fetched once. */
export interface PlatformInfo {
  sandboxDomain: string;
  publicDomain: string | null;
}
let platformInfo: Promise<PlatformInfo> | undefined;
export function platform(): Promise<PlatformInfo> {
  platformInfo ??= request<PlatformInfo>('GET', '/dashboard/platform.json').catch((err: unknown) => {
    platformInfo = undefined;
    throw err;
  });
  return platformInfo;
}

export const templates = {
  list: () => request<Template[]>('GET', '/templates'),
  get: (id: string) => request<{ templateID: string; aliases?: string[]; names?: string[]; builds: TemplateBuild[] }>('GET', `/templates/${encodeURIComponent(id)}`),
  status: (id: string, buildId: string, logsOffset: number) =>
    request<BuildStatus>('GET', `/templates/${encodeURIComponent(id)}/builds/${encodeURIComponent(buildId)}/status?logsOffset=${logsOffset}`),
};

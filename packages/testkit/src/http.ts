import { request } from 'node:http';

export interface HttpResponse {
  status: number;
  body: string;
}

/**
 * Minimal HTTP/1.1 request without connection reuse. Used instead of fetch for health checks:
 * a fetch whose only pending work is an unref'd abort timer can let the process exit mid-wait.
 */
export function httpRequest(url: string, opts: { method?: string; body?: string; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { connection: 'close', ...opts.headers };
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const req = request(url, { method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.setTimeout(opts.timeoutMs ?? 5_000, () => req.destroy(new Error(`timed out after ${opts.timeoutMs ?? 5_000} ms`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

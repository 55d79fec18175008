/**
 * Where the platform path of one runCode('1+1') goes: in one code-interpreter sandbox, interleaved, p50 of each of
 *   direct   POST /execute from the host straight to the container's port 49999
 *   proxy    the same through the platform proxy (routing headers), plain node:http
 *   sdk      the published SDK's runCode through the platform
 * Run: `cd apps/api && npx tsx bench/code-interpreter-hops.ts` (N=150 rounds; TIDEPOOL_CODE_INTERPRETER_IMAGE picks
 * the image, e.g. one with another server for an A/B).
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { Sandbox } from '@e2b/code-interpreter';
import { startApiProcess } from './api-process.ts';
import { SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';

const N = Number(process.env.N ?? 150);
const api = await startApiProcess({ TIDEPOOL_WARM_POOL: 'off' });
try {
  const sbx = await Sandbox.create({ apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, timeoutMs: 600_000 });
  const container = execFileSync('docker', ['ps', '-q', '--filter', `label=${SANDBOX_LABEL}=${sbx.sandboxId}`]).toString().trim();
  const ip = execFileSync('docker', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', container]).toString().trim().split(' ')[0]!;
  const agent = new http.Agent({ keepAlive: true });
  const post = (host: string, port: number, headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      const req = http.request({ host, port, path: '/execute', method: 'POST', agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (data: string) => (body += data));
        res.on('end', () => (body.includes('"text":"2"') ? resolve(performance.now() - started) : reject(new Error(`unexpected answer: ${body.slice(0, 500)}`))));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ code: '1+1' }));
    });
  const apiPort = Number(new URL(api.url).port);
  const token = (sbx as unknown as { envdAccessToken?: string }).envdAccessToken;
  const ways: Record<string, () => Promise<number>> = {
    direct: () => post(ip, 49999, {}),
    proxy: () => post('127.0.0.1', apiPort, { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', ...(token ? { 'X-Access-Token': token } : {}) }),
    sdk: async () => {
      const started = performance.now();
      const execution = await sbx.runCode('1+1');
      if (execution.text !== '2') throw new Error(`runCode gave ${execution.text}`);
      return performance.now() - started;
    },
  };
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (let i = 0; i < 20; i += 1) for (const way of Object.values(ways)) await way();
  for (let i = 0; i < N; i += 1) {
    const order = i % 2 === 0 ? Object.keys(ways) : Object.keys(ways).reverse();
    for (const name of order) times[name]!.push(await ways[name]!());
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  for (const [name, xs] of Object.entries(times)) console.log(`${name}: p50 ${median(xs).toFixed(2)} ms (n=${xs.length})`);
  await sbx.kill();
} finally {
  await api.stop();
}

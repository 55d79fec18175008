/**
 * The least a Node HTTP proxy can do on this machine: every request forwarded as it is (method, path, headers,
 * body streamed) to the upstream address argv[2] at envd's port over a keep-alive pool, and the answer streamed
 * back; no routing, checks, metrics or logs. The floor under the sandbox proxy's own cost in proxy-hop-bench.ts.
 * Prints `listening <port>` on stdout.
 */
import http from 'node:http';
import { ENVD_PORT } from '@tidepool/protocol/envd';

const upstream = process.argv[2];
if (!upstream) throw new Error('usage: bare-proxy-server.ts <upstream address>');

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const server = http.createServer((req, res) => {
  const forwarded = http.request({ host: upstream, port: ENVD_PORT, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  forwarded.on('error', () => res.destroy());
  req.pipe(forwarded);
});
server.keepAliveTimeout = 620_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.once('SIGTERM', () => process.exit(0));

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { type HttpsListener, listenHttps } from './https-listener.ts';
import { localCertificate, type TlsMaterial } from './local-ca.ts';

const logger = pino({ level: 'silent' });
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function plainApp(): Promise<FastifyInstance> {
  const app = Fastify();
  app.get('/who', async (request) => ({ encrypted: Boolean((request.raw.socket as tls.TLSSocket).encrypted), host: request.headers.host }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  // Upgrades on the plain server (the sandbox proxy's hook): answer 101 and echo one chunk.
  app.server.on('upgrade', (_req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    socket.once('data', (chunk: Buffer) => socket.end(`echo:${chunk.toString()}`));
  });
  cleanups.push(() => app.close());
  return app;
}

async function material(domain: string): Promise<TlsMaterial> {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-https-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return localCertificate({ dataDir: dir, domain, logger });
}

function get(listener: HttpsListener, ca: string, servername: string): Promise<{ status: number; body: string; san: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: listener.port, path: '/who', servername, ca, headers: { host: servername }, agent: false }, (res) => {
      const san = (res.socket as tls.TLSSocket).getPeerCertificate().subjectaltname ?? '';
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, san }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HTTPS listener', () => {
  it('hands requests and upgrades to the plain server, verified against the local CA', async () => {
    const app = await plainApp();
    const cert = await material('tidepool.localhost');
    const listener = await listenHttps(app, { host: '127.0.0.1', port: 0, material: async () => cert, logger });
    cleanups.push(() => listener.close());
    const ca = readFileSync(cert.caFile!, 'utf8');
    const response = await get(listener, ca, '8000-abc.tidepool.localhost');
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ encrypted: true, host: '8000-abc.tidepool.localhost' });
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: listener.port, servername: '3000-abc.tidepool.localhost', ca, agent: false, headers: { connection: 'upgrade', upgrade: 'echo' } });
      req.on('upgrade', (_res, socket) => {
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
        socket.on('end', () => resolve(text));
        socket.write('hi');
      });
      req.on('error', reject);
      req.end();
    });
    expect(echoed).toBe('echo:hi');
  });

  it('serves a changed certificate to new connections without a restart', async () => {
    const app = await plainApp();
    const first = await material('one.localhost');
    const second = await material('two.localhost');
    let current = first;
    const listener = await listenHttps(app, { host: '127.0.0.1', port: 0, material: async () => current, logger, checkEveryMs: 50 });
    cleanups.push(() => listener.close());
    expect((await get(listener, readFileSync(first.caFile!, 'utf8'), 'x.one.localhost')).san).toContain('*.one.localhost');
    current = second;
    await new Promise((r) => setTimeout(r, 200));
    expect((await get(listener, readFileSync(second.caFile!, 'utf8'), 'x.two.localhost')).san).toContain('*.two.localhost');
  });

  it('names the setting when the port cannot be taken', async () => {
    const app = await plainApp();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const cert = await material('tidepool.localhost');
    const port = (blocker.address() as AddressInfo).port;
    await expect(listenHttps(app, { host: '127.0.0.1', port, material: async () => cert, logger })).rejects.toThrow(/TIDEPOOL_HTTPS_PORT\): EADDRINUSE/);
  });
});

import { createServer, type RequestListener, type Server } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { fetchGlobalEnvs } from './global-envs.ts';

const logger = pino({ level: 'silent' });
let server: Server | undefined;

afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** A stand-in envd on a loopback port, answering `/envs` with `handler`. */
async function envd(handler: RequestListener): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('fetchGlobalEnvs', () => {
  it('reads the string variables with the access token', async () => {
    let token: string | undefined;
    const url = await envd((req, res) => {
      token = req.headers['x-access-token'] as string | undefined;
      res.end(JSON.stringify({ A: '1', B: 'two', N: 3, O: {} }));
    });
    expect(await fetchGlobalEnvs(url, 'secret', logger)).toEqual({ A: '1', B: 'two' });
    expect(token).toBe('secret');
  });

  it('gives no variables for a refusal, a body that is not an object, an oversized answer, no answer', async () => {
    const answers: RequestListener[] = [
      (_req, res) => res.writeHead(401).end('{"A":"1"}'),
      (_req, res) => res.end('[1,2]'),
      (_req, res) => res.end('not json'),
      (_req, res) => res.end(JSON.stringify({ A: 'x'.repeat(2 * 1024 * 1024) })),
      () => undefined,
    ];
    for (const answer of answers) {
      const url = await envd(answer);
      expect(await fetchGlobalEnvs(url, undefined, logger, 300)).toEqual({});
      server!.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
    expect(await fetchGlobalEnvs('http://127.0.0.1:1', undefined, logger)).toEqual({});
  });
});

import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { bodyFraming, EgressRequestError, parseRequestHead, relayRequests } from './egress-http-relay.ts';

/** Feeds `input` (in the given pieces) through the relay and returns what reached the destination. */
async function relay(pieces: string[], inject: Array<[string, string]> = [['Authorization', 'Bearer s3cret']], host = 'api.test'): Promise<string> {
  const source = new PassThrough();
  const sink = new PassThrough();
  const out: Buffer[] = [];
  sink.on('data', (c: Buffer) => out.push(c));
  const done = relayRequests(source, sink, { host, headers: async () => inject });
  done.catch(() => undefined); // observed below, after every piece is written
  for (const piece of pieces) {
    source.write(piece);
    await new Promise((r) => setImmediate(r));
  }
  source.end();
  await done;
  return Buffer.concat(out).toString('latin1');
}

async function refused(pieces: string[], host = 'api.test'): Promise<EgressRequestError> {
  try {
    await relay(pieces, [], host);
  } catch (error) {
    expect(error).toBeInstanceOf(EgressRequestError);
    return error as EgressRequestError;
  }
  throw new Error('relayed');
}

describe('egress HTTP relay', () => {
  it('sets the headers on every request of a keep-alive connection, replacing what the sandbox sent, bodies intact', async () => {
    const out = await relay([
      'POST /a HTTP/1.1\r\nHost: api.test\r\nauthorization: mine\r\nContent-Length: 5\r\n\r\nhel',
      'loGET /b HTTP/1.1\r\nHost: API.test:80\r\nX-Other: ${e2b.secrets.tok}\r\n\r\n',
      'PUT /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n',
    ]);
    expect(out).toBe(
      'POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nAuthorization: Bearer s3cret\r\n\r\nhello' +
        'GET /b HTTP/1.1\r\nHost: API.test:80\r\nX-Other: ${e2b.secrets.tok}\r\nAuthorization: Bearer s3cret\r\n\r\n' +
        'PUT /c HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer s3cret\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n',
    );
  });

  it('relays the rest of an upgraded connection untouched', async () => {
    const out = await relay(['GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /x HTTP/1.1\r\n\r\n']);
    expect(out.endsWith('\r\n\r\nGET /x HTTP/1.1\r\n\r\n')).toBe(true);
    expect(out.match(/Authorization/g)).toHaveLength(1);
  });

  it('refuses a request for another Host (domain fronting) or an absolute target, on any request of the connection', async () => {
    expect((await refused(['GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n'])).status).toBe(421);
    expect((await refused(['GET / HTTP/1.1\r\n\r\n'])).status).toBe(421);
    expect((await refused(['GET / HTTP/1.1\r\nHost: api.test\r\nHost: evil.test\r\n\r\n'])).status).toBe(421);
    const second = await refused(['GET / HTTP/1.1\r\nHost: api.test\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n']);
    expect([second.status, second.relayed]).toEqual([421, 1]);
    expect((await refused(['GET http://evil.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n'])).message).toMatch(/origin-form/);
  });

  it('refuses ambiguous framing and malformed heads (smuggling)', async () => {
    const h = (lines: string) => [`POST / HTTP/1.1\r\nHost: api.test\r\n${lines}\r\n`];
    expect((await refused(h('Content-Length: 3\r\nTransfer-Encoding: chunked\r\n'))).message).toMatch(/both/);
    expect((await refused(h('Content-Length: 3\r\nContent-Length: 4\r\n'))).message).toMatch(/conflicting/);
    expect((await refused(h('Content-Length: -1\r\n'))).message).toMatch(/not a number/);
    expect((await refused(h('Transfer-Encoding: chunked, gzip\r\n'))).message).toMatch(/chunked/);
    expect((await refused(h('X-A: 1\r\n folded\r\n'))).message).toMatch(/folding/);
    expect((await refused(h('X-A : 1\r\n'))).message).toMatch(/invalid name/);
    expect((await refused(['POST / HTTP/1.1\r\nHost: api.test\r\nX: a\nb\r\n\r\n'])).message).toMatch(/bare CR, LF/);
    expect((await refused(h('Transfer-Encoding: chunked\r\n').map((s) => `${s}zz\r\n`))).message).toMatch(/chunk size/);
    expect((await refused(['GET / HTTP/1.1\r\nHost: api.test\r\nX: ' + 'a'.repeat(70_000)])).message).toMatch(/larger than/);
    expect((await refused(['GET / HTTP/2.0\r\nHost: api.test\r\n\r\n'])).message).toMatch(/request line/);
  });

  it('reads framing strictly', () => {
    const head = (h: string) => parseRequestHead(Buffer.from(`GET / HTTP/1.1\r\n${h}\r\n`));
    expect(bodyFraming(head('Content-Length: 5, 5\r\n'))).toEqual({ length: 5 });
    expect(bodyFraming(head('Transfer-Encoding: gzip, chunked\r\n'))).toEqual({ chunked: true });
    expect(bodyFraming(head(''))).toEqual({ length: 0 });
  });
});

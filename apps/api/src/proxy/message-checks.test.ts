import { describe, expect, it } from 'vitest';
import { requestFramingProblem, upstreamHeadProblem } from './message-checks.ts';

describe('upstreamHeadProblem', () => {
  it('accepts an ordinary response head', () => {
    expect(upstreamHeadProblem(200, 'OK', ['Content-Type', 'text/plain', 'Content-Length', '2'])).toBeUndefined();
    expect(upstreamHeadProblem(404, '', [])).toBeUndefined();
  });

  it('refuses control characters, bad names, bad statuses and conflicting framing', () => {
    expect(upstreamHeadProblem(200, 'O\x01K', [])).toBe('invalid status line');
    expect(upstreamHeadProblem(99, 'x', [])).toMatch(/invalid status/);
    expect(upstreamHeadProblem(101, 'Switching Protocols', [])).toMatch(/invalid status/);
    expect(upstreamHeadProblem(101, 'Switching Protocols', ['Upgrade', 'websocket'], true)).toBeUndefined();
    expect(upstreamHeadProblem(200, 'OK', [], true)).toMatch(/invalid status/);
    expect(upstreamHeadProblem(600, 'x', [])).toMatch(/invalid status/);
    expect(upstreamHeadProblem(200, 'OK', ['Bad Name', 'x'])).toMatch(/invalid header/);
    expect(upstreamHeadProblem(200, 'OK', ['X-Ok', 'a\x00b'])).toMatch(/invalid header/);
    expect(upstreamHeadProblem(200, 'OK', ['Content-Length', '1', 'content-length', '1'])).toBe('duplicate content-length');
    expect(upstreamHeadProblem(200, 'OK', ['Content-Length', '-1'])).toBe('invalid content-length');
    expect(upstreamHeadProblem(200, 'OK', ['Content-Length', '1', 'Transfer-Encoding', 'chunked'])).toBe('both content-length and transfer-encoding');
  });
});

describe('requestFramingProblem', () => {
  it('lets plain and chunked uploads through', () => {
    expect(requestFramingProblem('GET', ['Host', 'h'])).toBeUndefined();
    expect(requestFramingProblem('POST', ['Content-Length', '5'])).toBeUndefined();
    expect(requestFramingProblem('POST', ['Transfer-Encoding', 'gzip, chunked'])).toBeUndefined();
  });

  it('refuses smuggling shapes', () => {
    expect(requestFramingProblem('POST', ['Content-Length', '5', 'Transfer-Encoding', 'chunked'])).toBeDefined();
    expect(requestFramingProblem('POST', ['Content-Length', '5', 'Content-Length', '6'])).toBeDefined();
    expect(requestFramingProblem('POST', ['Content-Length', '5x'])).toBeDefined();
    expect(requestFramingProblem('GET', ['Transfer-Encoding', 'chunked'])).toBe('transfer-encoding on GET');
    expect(requestFramingProblem('HEAD', ['Transfer-Encoding', 'chunked'])).toBeDefined();
    expect(requestFramingProblem('POST', ['Transfer-Encoding', 'chunked, gzip'])).toBeDefined();
  });
});

import { PassThrough } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { prettyLine, prettyLines } from './pretty-lines.ts';

describe('prettyLine', () => {
  it('shows time, level, message and the other fields as key=value', () => {
    const line = JSON.stringify({ level: 30, time: Date.UTC(2026, 10, 29, 3, 41, 7, 123), pid: 1, hostname: 'h', service: 'tidepool-api', msg: 'sandbox created', sandboxId: 'abc', teamId: 't 1', n: 3 });
    expect(prettyLine(line)).toBe('03:41:07.123 INFO  sandbox created sandboxId=abc teamId="t 1" n=3');
  });

  it("shows an error's message, and its stack from ERROR up", () => {
    const err = { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' };
    expect(prettyLine(JSON.stringify({ level: 40, time: 0, msg: 'retrying', err }))).toBe('00:00:00.000 WARN  retrying err=boom');
    expect(prettyLine(JSON.stringify({ level: 50, time: 0, msg: 'failed', err }))).toBe('00:00:00.000 ERROR failed err=boom\n    Error: boom\n        at x');
  });

  it('passes on what is not a pino line', () => {
    expect(prettyLine('plain text')).toBe('plain text');
    expect(prettyLine('{"no":"level"}')).toBe('{"no":"level"}');
  });
});

describe('prettyLines', () => {
  it('turns the lines a pino logger writes into pretty ones, split writes included', async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const logger = pino({ base: undefined, timestamp: false }, prettyLines(out));
    logger.info({ sandboxId: 's1' }, 'one');
    logger.warn('two');
    await new Promise((resolve) => setImmediate(resolve));
    expect(text).toBe('INFO  one sandboxId=s1\nWARN  two\n');
  });
});

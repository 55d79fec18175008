import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExecutionStream } from './execution-stream.ts';

/** The part of ServerResponse the stream uses, recording what was written. */
function fakeResponse() {
  const written: string[] = [];
  const res = {
    destroyed: false,
    status: 0,
    ended: false,
    writeHead(status: number) {
      this.status = status;
    },
    flushHeaders() {},
    write(chunk: string) {
      written.push(chunk);
      return true;
    },
    end() {
      this.ended = true;
    },
  };
  const frames = () => written.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line));
  return { res, frames };
}

const options = { keepaliveMs: 1000, maxOutputBytes: 20, maxResultBytes: 200 };

afterEach(() => vi.useRealTimers());

describe('ExecutionStream', () => {
  it('writes one JSON frame per line and end_of_execution last, once', () => {
    const { res, frames } = fakeResponse();
    const stream = new ExecutionStream(res as unknown as ServerResponse, options);
    stream.executionCount(1);
    stream.stdout('a\n');
    stream.result({ text: '2' }, true);
    stream.error('E', 'v', 'tb');
    stream.end();
    stream.end();
    stream.stdout('late');
    expect(res.status).toBe(200);
    expect(frames().map((f) => f.type)).toEqual(['number_of_executions', 'stdout', 'result', 'error', 'end_of_execution']);
    expect(frames()[2]).toEqual({ type: 'result', text: '2', is_main_result: true });
    expect(res.ended).toBe(true);
  });

  it('sends keepalives while running, none after the end', () => {
    vi.useFakeTimers();
    const { res, frames } = fakeResponse();
    const stream = new ExecutionStream(res as unknown as ServerResponse, options);
    vi.advanceTimersByTime(3500);
    stream.end();
    vi.advanceTimersByTime(5000);
    expect(frames().map((f) => f.type)).toEqual(['keepalive', 'keepalive', 'keepalive', 'end_of_execution']);
  });

  it('cuts output at the byte budget, says so once, and drops the rest', () => {
    const { res, frames } = fakeResponse();
    const stream = new ExecutionStream(res as unknown as ServerResponse, options);
    stream.stdout('0123456789');
    stream.stderr('abcdefghijKLMNOP');
    stream.stdout('more');
    stream.end();
    const got = frames();
    expect(got[0]).toMatchObject({ type: 'stdout', text: '0123456789' });
    expect(got[1]).toMatchObject({ type: 'stderr', text: 'abcdefghij' });
    expect(got[2].text).toContain('output truncated');
    expect(got.filter((f) => f.type !== 'end_of_execution')).toHaveLength(3);
  });

  it('never splits a multi-byte character at the cut', () => {
    const { res, frames } = fakeResponse();
    const stream = new ExecutionStream(res as unknown as ServerResponse, { ...options, maxOutputBytes: 5 });
    stream.stdout('ééé');
    expect(frames()[0].text).toBe('éé');
  });

  it('replaces results past the result budget with a note', () => {
    const { res, frames } = fakeResponse();
    const stream = new ExecutionStream(res as unknown as ServerResponse, options);
    stream.result({ text: 'small' }, false);
    stream.result({ png: 'x'.repeat(500) }, false);
    const got = frames();
    expect(got[0]).toMatchObject({ type: 'result', text: 'small' });
    expect(got[1]).toMatchObject({ type: 'stderr' });
    expect(got[1].text).toContain('was dropped');
  });
});

import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExecutionStream, HEAD_HOLD_MS } from './execution-stream.ts';

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
    writableEnded: false,
    cork() {},
    uncork() {},
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

describe('ExecutionStream on a real connection', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  /** Serves one response written by `run`; returns each chunk the client socket read. */
  async function exchange(run: (stream: ExecutionStream) => void): Promise<string[]> {
    server = createServer((_req, res) => run(new ExecutionStream(res, options)));
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const chunks: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('POST /execute HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'));
      socket.on('data', (data) => chunks.push(data.toString()));
      socket.on('end', resolve);
      socket.on('error', reject);
    });
    return chunks;
  }

  it('sends a short execution as one write: head, frames, end and the last chunk together', async () => {
    const chunks = await exchange((stream) => {
      setTimeout(() => {
        stream.executionCount(1);
        stream.result({ text: '2' }, true);
        void Promise.resolve().then(() => stream.end());
      }, 2);
    });
    expect(chunks).toHaveLength(1);
    expect(chunks[0]!).toMatch(/^HTTP\/1.1 200/);
    expect(chunks[0]!).toContain('"number_of_executions"');
    expect(chunks[0]!).toContain('"end_of_execution"');
    expect(chunks[0]!.endsWith('0\r\n\r\n')).toBe(true);
  });

  it('shows the head of a longer execution before its first frame', async () => {
    const chunks = await exchange((stream) => setTimeout(() => stream.end(), HEAD_HOLD_MS + 300));
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    expect(chunks[0]!).toMatch(/^HTTP\/1.1 200/);
    expect(chunks[0]!).not.toContain('end_of_execution');
    expect(chunks.at(-1)!).toContain('end_of_execution');
  });
});

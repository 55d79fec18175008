import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import {
  Process,
  Signal,
  StreamInputRequestSchema,
  type ConnectResponse,
  type ProcessEvent,
  type StartResponse,
  type StreamInputRequest,
} from '@tidepool/protocol/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEnvd, type RunningEnvd } from './support/start-envd.ts';
import { isAlive, until } from './support/waiting.ts';

let envd: RunningEnvd;

beforeAll(async () => {
  envd = await startEnvd();
});

afterAll(async () => {
  await envd?.close();
});

const encoder = new TextEncoder();
const decoder = new TextDecoder();

type Stream = AsyncIterable<StartResponse | ConnectResponse>;

/** Reads a stream up to its `start` event, and returns the pid plus a collector for the rest. */
async function openStream(stream: Stream): Promise<{ pid: number; live: ProcessEvent[]; rest: Promise<ProcessEvent[]> }> {
  const iterator = stream[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done || first.value.event?.event.case !== 'start') throw new Error(`expected start event, got ${JSON.stringify(first.value)}`);
  const pid = first.value.event.event.value.pid;
  const events: ProcessEvent[] = [];
  const rest = (async () => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) return events;
      if (next.value.event) events.push(next.value.event);
    }
  })();
  return { pid, live: events, rest };
}

function output(events: ProcessEvent[], kind: 'stdout' | 'stderr' | 'pty' = 'stdout'): string {
  return events
    .map((e) => (e.event.case === 'data' && e.event.value.output.case === kind ? decoder.decode(e.event.value.output.value) : ''))
    .join('');
}

function endOf(events: ProcessEvent[]) {
  const ends = events.filter((e) => e.event.case === 'end');
  expect(ends).toHaveLength(1);
  expect(events.at(-1)?.event.case).toBe('end');
  const end = ends[0].event;
  if (end.case !== 'end') throw new Error('unreachable');
  return end.value;
}

async function errorOf(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error('expected the call to fail');
}

async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return ConnectError.from(error).code;
  }
}

describe.each([
  { codec: 'json', binary: false },
  { codec: 'binary', binary: true },
])('process.Process over raw Connect ($codec)', ({ binary }) => {
  let client: Client<typeof Process>;

  beforeAll(() => {
    client = createClient(Process, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat: binary }));
  });

  it('streams start, data and exactly one end with Go-style status', async () => {
    const { rest } = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'printf out; printf err >&2; exit 3'] }, stdin: false }));
    const events = await rest;
    expect(output(events, 'stdout')).toBe('out');
    expect(output(events, 'stderr')).toBe('err');
    expect(endOf(events)).toMatchObject({ exitCode: 3, exited: true, status: 'exit status 3', error: 'exit status 3' });
  });

  it('reports a clean exit without error', async () => {
    const { rest } = await openStream(client.start({ process: { cmd: 'true' } }));
    const end = endOf(await rest);
    expect(end.exitCode).toBe(0);
    expect(end.exited).toBe(true);
    expect(end.status).toBe('exit status 0');
    expect(end.error).toBeUndefined();
  });

  it('splits pipe output into chunks of at most 32 KiB', async () => {
    const { rest } = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'head -c 200000 /dev/zero'] } }));
    const events = await rest;
    const sizes = events.flatMap((e) => (e.event.case === 'data' && e.event.value.output.case === 'stdout' ? [e.event.value.output.value.length] : []));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(200000);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(32 * 1024);
  });

  it('delivers large output intact to a slow reader (backpressure)', async () => {
    const total = 12 * 1024 * 1024;
    const stream = client.start({ process: { cmd: '/bin/sh', args: ['-c', `head -c ${total} /dev/zero; echo -n END >&2`] } });
    let bytes = 0;
    let stderr = '';
    let ended = false;
    let n = 0;
    for await (const message of stream) {
      const event = message.event?.event;
      if (event?.case === 'data' && event.value.output.case === 'stdout') bytes += event.value.output.value.length;
      if (event?.case === 'data' && event.value.output.case === 'stderr') stderr += decoder.decode(event.value.output.value);
      if (event?.case === 'end') ended = event.value.exitCode === 0;
      // Stall now and then so that the server-side queue fills up and reading pauses.
      if (++n % 64 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    expect(bytes).toBe(total);
    expect(stderr).toBe('END');
    expect(ended).toBe(true);
  });

  it('feeds stdin through StreamInput (stdin absent means a pipe)', async () => {
    const { pid, rest } = await openStream(client.start({ process: { cmd: 'cat' } }));
    async function* input(): AsyncGenerator<StreamInputRequest> {
      yield create(StreamInputRequestSchema, { event: { case: 'start', value: { process: { selector: { case: 'pid', value: pid } } } } });
      yield create(StreamInputRequestSchema, { event: { case: 'keepalive', value: {} } });
      for (const part of ['one ', 'two ', 'three']) {
        yield create(StreamInputRequestSchema, { event: { case: 'data', value: { input: { input: { case: 'stdin', value: encoder.encode(part) } } } } });
      }
    }
    await client.streamInput(input());
    await client.closeStdin({ process: { selector: { case: 'pid', value: pid } } });
    const events = await rest;
    expect(output(events)).toBe('one two three');
    expect(endOf(events).exitCode).toBe(0);
  });

  it('StreamInput to an unknown process is not_found', async () => {
    async function* input(): AsyncGenerator<StreamInputRequest> {
      yield create(StreamInputRequestSchema, { event: { case: 'start', value: { process: { selector: { case: 'pid', value: 999_999 } } } } });
    }
    expect(await codeOf(client.streamInput(input()))).toBe(Code.NotFound);
  });

  it('selects processes by tag for List, Connect, SendInput and SendSignal', async () => {
    const tag = `tagged-${binary}`;
    const { pid, rest } = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'read line; echo "got $line"; exec sleep 30'] }, tag }));
    const listed = (await client.list({})).processes.find((p) => p.pid === pid);
    expect(listed?.tag).toBe(tag);
    expect(listed?.config?.cmd).toBe('/bin/sh');
    const byTag = { selector: { case: 'tag' as const, value: tag } };
    const watcher = await openStream(client.connect({ process: byTag }));
    expect(watcher.pid).toBe(pid);
    await client.sendInput({ process: byTag, input: { input: { case: 'stdin', value: encoder.encode('hi\n') } } });
    await until(() => output(watcher.live) === 'got hi\n');
    await client.sendSignal({ process: byTag, signal: Signal.SIGKILL });
    const events = await rest;
    expect(output(events)).toBe('got hi\n');
    expect(endOf(events)).toMatchObject({ exitCode: -1, exited: false, status: 'signal: killed' });
    const watched = await watcher.rest;
    expect(output(watched)).toBe('got hi\n');
    expect(await codeOf(client.sendSignal({ process: { selector: { case: 'tag', value: 'no-such-tag' } }, signal: Signal.SIGKILL }))).toBe(Code.NotFound);
  });

  it('resolves a reused tag to the newest process and forgets old exits', async () => {
    const tag = `reused-${binary}`;
    const byTag = { selector: { case: 'tag' as const, value: tag } };
    const first = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'exit 7'] }, tag }));
    await first.rest;
    const replay = await openStream(client.connect({ process: byTag }));
    expect(replay.pid).toBe(first.pid);
    expect(endOf(await replay.rest).exitCode).toBe(7);
    const second = await openStream(client.start({ process: { cmd: 'sleep', args: ['30'] }, tag }));
    const attached = await openStream(client.connect({ process: byTag }));
    expect(attached.pid).toBe(second.pid);
    await client.sendSignal({ process: byTag, signal: Signal.SIGKILL });
    expect(endOf(await attached.rest).status).toBe('signal: killed');
    await second.rest;
  });

  it('delivers SIGTERM and rejects other signals', async () => {
    const { pid, rest } = await openStream(client.start({ process: { cmd: 'sleep', args: ['30'] } }));
    const selector = { selector: { case: 'pid' as const, value: pid } };
    expect(await codeOf(client.sendSignal({ process: selector, signal: Signal.UNSPECIFIED }))).toBe(Code.Unimplemented);
    await client.sendSignal({ process: selector, signal: Signal.SIGTERM });
    expect(endOf(await rest)).toMatchObject({ exitCode: -1, exited: false, status: 'signal: terminated', error: 'signal: terminated' });
    expect(await codeOf(client.sendSignal({ process: { selector: { case: 'pid', value: 999_999 } }, signal: Signal.SIGTERM }))).toBe(Code.NotFound);
  });

  it('gives every subscriber the same live events', async () => {
    const start = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'read a; for i in 1 2 3; do echo "$a $i"; done; exit 2'] } }));
    const selector = { selector: { case: 'pid' as const, value: start.pid } };
    const one = await openStream(client.connect({ process: selector }));
    const two = await openStream(client.connect({ process: selector }));
    await client.sendInput({ process: selector, input: { input: { case: 'stdin', value: encoder.encode('x\n') } } });
    const [a, b, c] = await Promise.all([start.rest, one.rest, two.rest]);
    expect(output(a)).toBe('x 1\nx 2\nx 3\n');
    expect(output(b)).toBe(output(a));
    expect(output(c)).toBe(output(a));
    for (const events of [a, b, c]) expect(endOf(events).status).toBe('exit status 2');
  });

  it('replays start + end for a process that exited less than 30 s ago', async () => {
    const { pid, rest } = await openStream(client.start({ process: { cmd: '/bin/sh', args: ['-c', 'echo gone; exit 4'] } }));
    await rest;
    const replay = await openStream(client.connect({ process: { selector: { case: 'pid', value: pid } } }));
    expect(replay.pid).toBe(pid);
    const events = await replay.rest;
    expect(events).toHaveLength(1);
    expect(endOf(events)).toMatchObject({ exitCode: 4, status: 'exit status 4' });
    expect((await client.list({})).processes.some((p) => p.pid === pid)).toBe(false);
    expect(await codeOf(client.sendInput({ process: { selector: { case: 'pid', value: pid } }, input: { input: { case: 'stdin', value: encoder.encode('x') } } }))).toBe(Code.NotFound);
  });

  it('sends keepalives per Keepalive-Ping-Interval when idle', async () => {
    const { rest } = await openStream(
      client.start({ process: { cmd: 'sleep', args: ['0.7'] } }, { headers: { 'Keepalive-Ping-Interval': '0.2' } }),
    );
    const events = await rest;
    expect(events.filter((e) => e.event.case === 'keepalive').length).toBeGreaterThanOrEqual(2);
    expect(endOf(events).exitCode).toBe(0);
  });

  it('Connect-Timeout-Ms on Start kills the process with deadline_exceeded', async () => {
    const stream = client.start({ process: { cmd: 'sleep', args: ['30'] } }, { timeoutMs: 500 });
    const { pid, rest } = await openStream(stream);
    expect(await codeOf(rest)).toBe(Code.DeadlineExceeded);
    await until(() => !isAlive(pid), 3000);
    const replay = await openStream(client.connect({ process: { selector: { case: 'pid', value: pid } } }));
    expect(endOf(await replay.rest).status).toBe('signal: killed');
  });

  it('a client disconnect leaves the process running', async () => {
    const abort = new AbortController();
    const { pid, rest } = await openStream(client.start({ process: { cmd: 'sleep', args: ['30'] } }, { signal: abort.signal }));
    abort.abort();
    expect(await codeOf(rest)).toBe(Code.Canceled);
    await new Promise((r) => setTimeout(r, 150));
    expect(isAlive(pid)).toBe(true);
    expect((await client.list({})).processes.some((p) => p.pid === pid)).toBe(true);
    const watcher = await openStream(client.connect({ process: { selector: { case: 'pid', value: pid } } }));
    await client.sendSignal({ process: { selector: { case: 'pid', value: pid } }, signal: Signal.SIGKILL });
    expect(endOf(await watcher.rest).exitCode).toBe(-1);
  });

  it('a Connect deadline ends only the stream, not the process', async () => {
    const start = await openStream(client.start({ process: { cmd: 'sleep', args: ['30'] } }));
    const selector = { selector: { case: 'pid' as const, value: start.pid } };
    const watcher = await openStream(client.connect({ process: selector }, { timeoutMs: 300 }));
    expect(await codeOf(watcher.rest)).toBe(Code.DeadlineExceeded);
    expect(isAlive(start.pid)).toBe(true);
    await client.sendSignal({ process: selector, signal: Signal.SIGKILL });
    await start.rest;
  });

  it('runs a PTY: bytes in and out, chunks of at most 16 KiB, resize, wrong-kind input', async () => {
    const { pid, rest } = await openStream(
      client.start({ process: { cmd: '/bin/sh', args: ['-c', 'read x; stty size; head -c 60000 /dev/zero | tr "\\0" b; echo; echo "x=$x"'] }, pty: { size: { cols: 90, rows: 20 } } }),
    );
    const selector = { selector: { case: 'pid' as const, value: pid } };
    expect(await codeOf(client.sendInput({ process: selector, input: { input: { case: 'stdin', value: encoder.encode('no\n') } } }))).toBe(Code.Internal);
    expect(await codeOf(client.closeStdin({ process: selector }))).not.toBeUndefined();
    await client.update({ process: selector, pty: { size: { cols: 120, rows: 40 } } });
    await client.sendInput({ process: selector, input: { input: { case: 'pty', value: encoder.encode('yes\n') } } });
    const events = await rest;
    const chunks = events.flatMap((e) => (e.event.case === 'data' ? [e.event.value.output] : []));
    expect(chunks.every((c) => c.case === 'pty' && c.value instanceof Uint8Array && c.value.length <= 16 * 1024)).toBe(true);
    const text = output(events, 'pty');
    expect(text.includes('40 120')).toBe(true);
    expect(text.includes('x=yes')).toBe(true);
    expect(text.split('b').length - 1).toBe(60000);
    expect(endOf(events).exitCode).toBe(0);
  });

  it('Update on a pipe process is internal "tty not assigned to process"', async () => {
    const { pid, rest } = await openStream(client.start({ process: { cmd: 'sleep', args: ['30'] }, stdin: false }));
    const selector = { selector: { case: 'pid' as const, value: pid } };
    const error = await errorOf(client.update({ process: selector, pty: { size: { cols: 1, rows: 1 } } }));
    expect(error.code).toBe(Code.Internal);
    expect(error.rawMessage).toBe('tty not assigned to process');
    const stdinError = await errorOf(client.sendInput({ process: selector, input: { input: { case: 'stdin', value: encoder.encode('x') } } }));
    expect(stdinError.code).toBe(Code.Internal);
    expect(stdinError.rawMessage).toBe('error writing to stdin: stdin not enabled or closed');
    await client.sendSignal({ process: selector, signal: Signal.SIGKILL });
    await rest;
  });

  it('reports spawn failures and unknown users as errors of the stream', async () => {
    const missing = client.start({ process: { cmd: '/definitely/not/here' } });
    const spawnError = await openStream(missing).catch((e: unknown) => ConnectError.from(e));
    // With the exec helper the exec failure is exit status 127; without it, a spawn error.
    if (spawnError instanceof ConnectError) {
      expect(spawnError.code).toBe(Code.InvalidArgument);
      expect(spawnError.rawMessage).toMatch(/^error starting process '\/definitely\/not\/here': /);
    } else {
      expect(endOf(await spawnError.rest).exitCode).toBe(127);
    }
    const basic = `Basic ${Buffer.from('no-such-user:').toString('base64')}`;
    const authError = await openStream(client.start({ process: { cmd: 'true' } }, { headers: { authorization: basic } })).catch((e: unknown) => ConnectError.from(e));
    expect(authError).toBeInstanceOf(ConnectError);
    expect((authError as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { spawnPipeProcess } from './pipe-process.ts';

const logger = pino({ level: 'silent' });

/** Holds the event loop for `ms` (what a CPU-throttled or busy envd lives through). */
function holdLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy on purpose
  }
}

describe('pipe processes', () => {
  it('read what the pipes hold before abandoning them, also when envd did not run past the drain deadline', async () => {
    // The shell exits at once; a background child keeps its stdout and writes a little later. envd is held up (at
    // the end of a loop turn, after its pipes were polled) from before that write until long after the drain
    // deadline: when the next turn starts, its timers run before the pipes are read, and the output is waiting.
    const io = await spawnPipeProcess({ file: '/bin/sh', args: ['-c', '(sleep 0.2; echo late) & exit 0'] }, { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdin: false, logger });
    const output: string[] = [];
    const exited = new Promise<number>((resolve) => io.attach({ data: (_kind, data) => output.push(Buffer.from(data).toString()), exit: (info) => resolve(info.exitCode) }));
    setTimeout(() => setImmediate(() => holdLoop(500)), 60);
    expect(await exited).toBe(0);
    expect(output.join('')).toBe('late\n');
  });
});

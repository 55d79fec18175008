import { EventEmitter } from 'node:events';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { installProcessGuard } from './process-guard.ts';

describe('installProcessGuard', () => {
  it('logs uncaught exceptions and unhandled rejections instead of letting them end the process', () => {
    const lines: Array<{ msg: string; origin: string; sandboxId?: string }> = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const fake = new EventEmitter();
    const guard = installProcessGuard(logger, fake as unknown as NodeJS.Process);
    fake.emit('uncaughtException', Object.assign(new Error('writeHead: invalid char'), { code: 'ERR_INVALID_CHAR' }), 'uncaughtException');
    fake.emit('unhandledRejection', new Error('late'), Promise.resolve());
    expect(guard.faults).toBe(2);
    expect(lines.map((l) => l.origin)).toEqual(['uncaughtException', 'unhandledRejection']);
    guard.uninstall();
    expect(fake.listenerCount('uncaughtException')).toBe(0);
  });
});

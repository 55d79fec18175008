import { Writable } from 'node:stream';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has that the pretty form shows in its own place, or not at all. */
const SHOWN_APART = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'err']);

const value = (v: unknown): string => (typeof v === 'string' && /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v));

/**
 * One pino JSON line as a person reads it on a terminal: `HH:MM:SS.mmm LEVEL message key=value …`, an error's
 * message as `err=…` and, from ERROR up, its stack below. A line that is not pino's JSON is passed on as it is.
 */
export function prettyLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (typeof record !== 'object' || record === null || typeof record.level !== 'number') return line;
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '';
  const level = (LEVELS[record.level] ?? String(record.level)).padEnd(5);
  const fields = Object.entries(record)
    .filter(([key]) => !SHOWN_APART.has(key))
    .map(([key, v]) => `${key}=${value(v)}`);
  const err = record.err as { message?: unknown; stack?: unknown } | undefined;
  if (err && typeof err === 'object') fields.push(`err=${value(err.message ?? err)}`);
  const head = [time, level, String(record.msg ?? ''), ...fields].filter((part) => part !== '').join(' ');
  const stack = record.level >= 50 && typeof err?.stack === 'string' ? `\n${err.stack.replace(/^/gm, '    ')}` : '';
  return `${head}${stack}`;
}

/** A destination for pino that writes each line pretty to `out` (a terminal). */
export function prettyLines(out: NodeJS.WritableStream): Writable {
  let pending = '';
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) if (line !== '') out.write(`${prettyLine(line)}\n`);
      done();
    },
    final(done) {
      if (pending !== '') out.write(`${prettyLine(pending)}\n`);
      done();
    },
  });
}

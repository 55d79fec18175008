import { randomBytes } from 'node:crypto';
import { create, toJsonString } from '@bufbuild/protobuf';
import { StartResponseSchema } from '@tidepool/protocol/process';
import { describe, expect, it } from 'vitest';
import { endEvent, startEvent, type ProcessEventInit } from './event-stream.ts';
import { startResponseJson } from './event-json.ts';

const reference = (event: ProcessEventInit): string => toJsonString(StartResponseSchema, create(StartResponseSchema, { event }));

const data = (kind: 'stdout' | 'stderr' | 'pty', bytes: Uint8Array): ProcessEventInit => ({ event: { case: 'data', value: { output: { case: kind, value: bytes } } } });

const EVENTS: [string, ProcessEventInit][] = [
  ['a start', startEvent(4242)],
  ['a start with pid 0', startEvent(0)],
  ['a start with the largest pid', startEvent(4_294_967_295)],
  ['a clean exit', endEvent({ exitCode: 0, exited: true, status: 'exit status 0' })],
  ['a failing exit', endEvent({ exitCode: 3, exited: true, status: 'exit status 3' })],
  ['a negative exit code', endEvent({ exitCode: -1, exited: false, status: 'signal: killed' })],
  ['an error', endEvent({ exitCode: 0, exited: false, status: '', error: 'wait: no child' })],
  ['an empty error (set, so present)', endEvent({ exitCode: 0, exited: false, status: '', error: '' })],
  ['quotes, backslashes, control and non-ASCII characters', endEvent({ exitCode: 1, exited: true, status: 'a "b" \\ c\n\u0001 é 漢 😀 \ud800' })],
  ['nothing at all', { event: { case: undefined } }],
  ['an empty data event', { event: { case: 'data', value: { output: { case: undefined } } } }],
  ['empty stdout', data('stdout', new Uint8Array(0))],
  ['one byte of stderr', data('stderr', new Uint8Array([0xff]))],
  ['two bytes of pty', data('pty', new Uint8Array([0, 1]))],
  ['a 32 KiB chunk', data('stdout', new Uint8Array(randomBytes(32 * 1024)))],
  ['a view into a larger buffer', data('stdout', new Uint8Array(randomBytes(64).buffer, 7, 20))],
  ['a keepalive', { event: { case: 'keepalive', value: {} } }],
];

describe('startResponseJson', () => {
  it.each(EVENTS)('writes %s exactly as protobuf-es does', (_name, event) => {
    expect(startResponseJson(event)).toBe(reference(event));
  });

  it('matches protobuf-es on random exits and output', () => {
    for (let i = 0; i < 500; i += 1) {
      const exit = { exitCode: (Math.random() * 512 - 256) | 0, exited: Math.random() < 0.5, status: randomBytes(i % 9).toString('latin1'), ...(i % 3 === 0 ? { error: randomBytes(i % 5).toString('utf8') } : {}) };
      expect(startResponseJson(endEvent(exit))).toBe(reference(endEvent(exit)));
      const chunk = data(i % 2 === 0 ? 'stdout' : 'stderr', new Uint8Array(randomBytes(i)));
      expect(startResponseJson(chunk)).toBe(reference(chunk));
    }
  });
});

import { describe, expect, it } from 'vitest';
import { asWorkerEvent } from '../worker/worker-messages.ts';
import { parseBridgeEvent } from './python-kernel.ts';

describe('parseBridgeEvent (lines from the Python bridge, contents forgeable by kernel code)', () => {
  it('accepts well-formed events', () => {
    expect(parseBridgeEvent('{"ev":"stream","id":1,"name":"stdout","text":"hi"}')).toEqual({ ev: 'stream', id: 1, name: 'stdout', text: 'hi' });
    expect(parseBridgeEvent('{"ev":"dead","id":null,"message":"gone"}')).toEqual({ ev: 'dead', id: null, message: 'gone' });
    expect(parseBridgeEvent('{"ev":"ready","kernel_pid":42}')).toEqual({ ev: 'ready', kernel_pid: 42 });
  });

  it('ignores what is not JSON, not an object, or has fields of the wrong type', () => {
    for (const line of ['', 'null', '5', '[]', 'not json', '{"ev":"stream","id":1,"name":"stdout","text":5}', '{"ev":"result","id":"1","data":{},"main":true}', '{"ev":"error","id":1,"name":"E","value":"v","traceback":["x"]}', '{"ev":"nope"}']) {
      expect(parseBridgeEvent(line)).toBeUndefined();
    }
  });

  it('never passes on a kernel pid that would signal everything (0, 1, negative)', () => {
    for (const pid of [0, 1, -1, 1.5]) expect(parseBridgeEvent(`{"ev":"ready","kernel_pid":${pid}}`)).toEqual({ ev: 'ready', kernel_pid: null });
  });
});

describe('asWorkerEvent (messages from a JavaScript worker, which cell code can send itself)', () => {
  it('accepts well-formed events and drops the rest', () => {
    expect(asWorkerEvent({ ev: 'result', bundle: { text: '1' }, main: true })).toEqual({ ev: 'result', bundle: { text: '1' }, main: true });
    expect(asWorkerEvent({ ev: 'done', id: 3 })).toEqual({ ev: 'done', id: 3 });
    for (const raw of [null, 5, 'x', [], { ev: 'stdout', text: {} }, { ev: 'result', bundle: null, main: true }, { ev: 'count', count: '1' }, { ev: 'other' }]) {
      expect(asWorkerEvent(raw)).toBeUndefined();
    }
  });
});

import { describe, expect, it } from 'vitest';
import { asWorkerEvent } from '../worker/worker-messages.ts';
import { parseBridgeEvent } from './python-kernel.ts';

describe('parseBridgeEvent (lines from the Python bridge, contents forgeable by kernel code)', () => {
  it('accepts well-formed events', () => {
    expect(parseBridgeEvent('{"ev":"stream","id":1,"name":"stdout","text":"hi"}')).toEqual({ ev: 'stream', id: 1, name: 'stdout', text: 'hi' });
    expect(parseBridgeEvent('{"ev":"done","id":2,"problem":"ENOENT"}')).toEqual({ ev: 'done', id: 2, problem: 'ENOENT' });
    expect(parseBridgeEvent('{"ev":"ready"}')).toEqual({ ev: 'ready' });
  });

  it('ignores what is not JSON, not an object, or has fields of the wrong type', () => {
    for (const line of ['', 'null', '5', '[]', 'not json', '{"ev":"stream","id":1,"name":"stdout","text":5}', '{"ev":"result","id":"1","data":{},"main":true}', '{"ev":"error","id":1,"name":"E","value":"v","traceback":["x"]}', '{"ev":"done","id":null}', '{"ev":"fatal"}', '{"ev":"nope"}']) {
      expect(parseBridgeEvent(line)).toBeUndefined();
    }
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

import { describe, expect, it } from 'vitest';
import { isInterpreterSandbox, parseRunLine, RunFailure } from './interpreter.ts';

describe('parseRunLine', () => {
  it('maps the frames the Run code tab shows', () => {
    expect(parseRunLine('{"type":"stdout","text":"2\\n","timestamp":1}')).toEqual({ type: 'stdout', text: '2\n' });
    expect(parseRunLine('{"type":"stderr","text":"warn"}')).toEqual({ type: 'stderr', text: 'warn' });
    expect(parseRunLine('{"type":"error","name":"NameError","value":"x","traceback":"tb"}')).toEqual({ type: 'error', name: 'NameError', value: 'x', traceback: 'tb' });
    expect(parseRunLine('{"type":"number_of_executions","execution_count":3}')).toEqual({ type: 'count', executionCount: 3 });
    expect(parseRunLine('{"type":"end_of_execution"}')).toEqual({ type: 'end' });
  });

  it('keeps only known result formats of the right type', () => {
    const event = parseRunLine(JSON.stringify({ type: 'result', text: 'x', png: 'AAAA', html: 5, data: { a: [1] }, is_main_result: true, evil: '<script>' }));
    expect(event).toEqual({ type: 'result', result: { text: 'x', png: 'AAAA', data: { a: [1] }, is_main_result: true } });
  });

  it('ignores keepalives and unknown types; refuses what is not a JSON object', () => {
    expect(parseRunLine('{"type":"keepalive"}')).toBeNull();
    expect(parseRunLine('{"type":"something-new"}')).toBeNull();
    expect(() => parseRunLine('not json')).toThrow(RunFailure);
    expect(() => parseRunLine('[1,2]')).toThrow(/not a JSON object/);
    expect(() => parseRunLine('null')).toThrow(/not a JSON object/);
  });
});

describe('isInterpreterSandbox', () => {
  it('is true for the code-interpreter template by ID or name only', () => {
    expect(isInterpreterSandbox({ templateID: 'code-interpreter' })).toBe(true);
    expect(isInterpreterSandbox({ templateID: 'x1', alias: 'code-interpreter-v1' })).toBe(true);
    expect(isInterpreterSandbox({ templateID: 'base', alias: 'base' })).toBe(false);
  });
});

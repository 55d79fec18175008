import { describe, expect, it } from 'vitest';
import { LineSplitter } from './line-splitter.ts';

const collect = (max = 1024) => {
  const lines: string[] = [];
  const overlong: number[] = [];
  const splitter = new LineSplitter((l) => lines.push(l), max, (n) => overlong.push(n));
  return { lines, overlong, splitter };
};

describe('LineSplitter', () => {
  it('joins lines split across chunks and splits chunks holding several lines', () => {
    const { lines, splitter } = collect();
    splitter.push(Buffer.from('{"a":'));
    splitter.push(Buffer.from('1}\n{"b":2}\n{"c"'));
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    splitter.push(Buffer.from(':3}\n'));
    expect(lines).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  it('keeps a multi-byte character split between chunks whole', () => {
    const { lines, splitter } = collect();
    const bytes = Buffer.from('é€\n');
    splitter.push(bytes.subarray(0, 1));
    splitter.push(bytes.subarray(1, 4));
    splitter.push(bytes.subarray(4));
    expect(lines).toEqual(['é€']);
  });

  it('drops a line over the limit without buffering it, reports its size, and goes on', () => {
    const { lines, overlong, splitter } = collect(10);
    splitter.push(Buffer.from('short\n0123456789'));
    splitter.push(Buffer.from('ABCDEFGHIJ'));
    splitter.push(Buffer.from('KLM\nafter\n'));
    expect(lines).toEqual(['short', 'after']);
    expect(overlong).toEqual([23]);
  });

  it('end() flushes a last line without a newline', () => {
    const { lines, splitter } = collect();
    splitter.push(Buffer.from('a\nlast'));
    splitter.end();
    expect(lines).toEqual(['a', 'last']);
  });
});

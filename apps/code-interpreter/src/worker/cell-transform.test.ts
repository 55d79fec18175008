import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { CellSyntaxError, DEFAULT_IMPORT_HELPER, importsToRequires, prepareCell } from './cell-transform.ts';

/** Runs cells one after another in one fresh realm, the way the worker does; returns each cell's main result. */
async function runCells(language: 'javascript' | 'typescript', ...cells: string[]): Promise<unknown[]> {
  const realm = vm.createContext({ require: (m: string) => (m === 'node:path' ? { join: (...p: string[]) => p.join('/') } : { default: `default of ${m}`, __esModule: true, named: `named of ${m}` }), [DEFAULT_IMPORT_HELPER]: (m: any) => (m && m.__esModule ? m.default : m), Promise });
  const out: unknown[] = [];
  for (const cell of cells) {
    const prepared = prepareCell(cell, language);
    const value = await vm.runInContext(prepared.script, realm);
    out.push(prepared.hasMainResult ? value : '<no result>');
  }
  return out;
}

describe('prepareCell', () => {
  it('the last expression statement is the main result; other last statements give none', async () => {
    expect(await runCells('javascript', '1 + 1', 'const a = 5', 'if (true) { 3 }', '"x"; // comment')).toEqual([2, '<no result>', '<no result>', 'x']);
  });

  it('keeps let/const/var/function/class declarations for later cells (and allows declaring them again)', async () => {
    expect(
      await runCells('javascript', 'const a = 1; let b = 2; var c = 3', 'function f(x) { return x + a + b + c }', 'class K { v() { return 10 } }', 'f(new K().v())', 'const a = 100', 'a'),
    ).toEqual(['<no result>', '<no result>', '<no result>', 16, '<no result>', 100]);
  });

  it('keeps destructured names', async () => {
    expect(await runCells('javascript', 'const { p, q: [r, , s] } = { p: 1, q: [2, 3, 4] }', '[p, r, s]')).toEqual(['<no result>', [1, 2, 4]]);
  });

  it('allows top-level await, and a function declared below its use', async () => {
    expect(await runCells('javascript', 'const v = await Promise.resolve(7)\nlater(v)\nfunction later(x) { return x * 2 }')).toEqual(['<no result>']);
    expect(await runCells('javascript', 'const w = await Promise.resolve(7)\nfunction twice(x) { return x * 2 }\ntwice(w)')).toEqual([14]);
  });

  it('strips TypeScript types, interfaces and type-only imports', async () => {
    expect(await runCells('typescript', 'interface P { x: number }\nimport type { Q } from "q"\nconst p: P = { x: 4 } as P\nconst n = <number>p.x\nn satisfies number')).toEqual([4]);
  });

  it('keeps imported names under the names the cell wrote', async () => {
    expect(await runCells('typescript', 'import d, { named as alias } from "mod"\nimport * as path from "node:path"', '[d, alias, path.join("a", "b")]')).toEqual([
      '<no result>',
      ['default of mod', 'named of mod', 'a/b'],
    ]);
  });

  it('a syntax error names what and where', () => {
    expect(() => prepareCell('const = 1', 'typescript')).toThrow(CellSyntaxError);
    expect(() => prepareCell('let x = ;', 'javascript')).toThrow(/Expression expected\. \(line 1, column 9\)/);
  });

  it('turns imports into requires and leaves the rest of the text alone', () => {
    expect(importsToRequires('import "side"\nconst x = 1 // import y from "z"', 'javascript')).toBe('require("side");\nconst x = 1 // import y from "z"');
  });
});

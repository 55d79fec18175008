/**
 * The api's rooms depend one way: no two top-level rooms of src/ (a folder, or a file at the top) import each other,
 * and no files import each other in a circle. Read from the sources' relative imports (type-only ones included).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = dirname(fileURLToPath(import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [relative(SRC, path)] : [];
  });
}

/** Each source file and the files of src/ it imports (relative specifiers only). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(join(SRC, file), 'utf8');
    const targets = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)]
      .map((match) => normalize(join(dirname(file), match[1]!)))
      .filter((target) => !target.startsWith('..'));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

const roomOf = (file: string): string => file.split(sep)[0]!;

describe('the layering of apps/api/src', () => {
  const graph = importGraph();

  it('has no two top-level rooms that import each other', () => {
    const edges = new Map<string, string>();
    for (const [file, targets] of graph) {
      for (const target of targets) if (roomOf(file) !== roomOf(target)) edges.set(`${roomOf(file)} -> ${roomOf(target)}`, `${file} -> ${target}`);
    }
    const both = [...edges.keys()]
      .filter((edge) => {
        const [from, to] = edge.split(' -> ');
        return from! < to! && edges.has(`${to} -> ${from}`);
      })
      .map((edge) => {
        const [from, to] = edge.split(' -> ');
        return `${edge} (${edges.get(edge)}) and back (${edges.get(`${to} -> ${from}`)})`;
      });
    expect(both).toEqual([]);
  });

  it('has no circle of files', () => {
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        circles.push([...path.slice(path.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const target of graph.get(file) ?? []) if (graph.has(target)) visit(target, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of graph.keys()) visit(file, []);
    expect(circles).toEqual([]);
  });

  it('reads the graph it judges (a sanity check of the reader)', () => {
    expect(graph.size).toBeGreaterThan(200);
    expect(graph.get(join('server', 'api-server.ts'))).toContain(join('http', 'route-auth.ts'));
  });
});

/**
 * Reads a V8 CPU profile (`.cpuprofile`: what `--cpu-prof` and the inspector's Profiler write) and sums its
 * samples' self time by function and by where the code lives (a source file of this repository, a package under
 * node_modules, Node's own modules, or V8's (program)/(garbage collector)/(idle)), so two profiles of the same
 * work can be compared per create. A sample counts for the time since the one before, at most MAX_SAMPLE_MS: on a
 * loaded machine the process is descheduled between samples, and the sample after such a gap would otherwise take
 * the whole gap (the first sample's delta is the profiler's own start).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const MAX_SAMPLE_MS = 1;

export interface ProfileSummary {
  /** Sampled time that was not idle (ms). */
  busyMs: number;
  /** Self time by function (`name file:line`), ms, largest first. */
  functions: Array<[string, number]>;
  /** Self time by where the code lives, ms, largest first. */
  places: Array<[string, number]>;
  /** Time with a function of this repository's source on the stack (inclusive, each function once per sample), ms. */
  sourceInclusive: Array<[string, number]>;
}

/** Where a frame's code lives: `src/<dir>/<file>`, a package name, `node:<module>`, or V8's own bucket. */
export function placeOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const modules = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith('node:')) return url;
  const source = /\/apps\/([^/]+)\/(src\/.*)$/.exec(url);
  if (source) return `${source[1]}/${source[2]}`;
  return url.replace(/^file:\/\//, '');
}

function sorted(totals: Map<string, number>): Array<[string, number]> {
  return [...totals.entries()].sort((a, b) => b[1] - a[1]);
}

export function summarizeProfile(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busyMs = 0;
  for (const [i, id] of profile.samples.entries()) {
    const node = byId.get(id);
    if (!node || i === 0) continue;
    const ms = Math.min(MAX_SAMPLE_MS, (profile.timeDeltas[i] ?? 0) / 1000);
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    busyMs += ms;
    const file = url.split('/').slice(-1)[0] ?? '';
    const name = `${functionName || '(anonymous)'} ${file}${url ? `:${lineNumber + 1}` : ''}`;
    functions.set(name, (functions.get(name) ?? 0) + ms);
    const place = placeOf(url, functionName);
    places.set(place, (places.get(place) ?? 0) + ms);
    const onStack = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      const source = /\/apps\/[^/]+\/src\/(.*)$/.exec(frame.url)?.[1];
      if (source) onStack.add(`${frame.functionName || '(anonymous)'} ${source}:${frame.lineNumber + 1}`);
    }
    for (const name of onStack) inclusive.set(name, (inclusive.get(name) ?? 0) + ms);
  }
  return { busyMs, functions: sorted(functions), places: sorted(places), sourceInclusive: sorted(inclusive) };
}

/**
 * The summary as text lines: each item's share of the busy samples, and that share of `cpuMsPerCreate` (the CPU per
 * create measured without the profiler, which itself costs CPU) when given, else of the sampled time over `creates`.
 */
export function profileReport(file: string, creates: number, cpuMsPerCreate?: number, top = 25): string[] {
  const summary = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  const perCreate = cpuMsPerCreate ?? summary.busyMs / creates;
  const line = ([name, ms]: [string, number]): string => `  ${((perCreate * ms) / summary.busyMs).toFixed(3).padStart(8)} ms/create  ${((100 * ms) / summary.busyMs).toFixed(1).padStart(5)}%  ${name}`;
  return [
    `${file}: ${summary.busyMs.toFixed(1)} ms sampled busy over ${creates} creates; shares of ${perCreate.toFixed(2)} ms per create${cpuMsPerCreate === undefined ? ' (sampled)' : ' (measured without the profiler)'}`,
    ' by place:',
    ...summary.places.slice(0, top).map(line),
    ' by function (self):',
    ...summary.functions.slice(0, top).map(line),
    ' this repository\'s functions (inclusive):',
    ...summary.sourceInclusive.slice(0, top).map(line),
  ];
}

// `tsx bench/cpu-profile-summary.ts <file.cpuprofile> <creates> [cpu ms per create] [top]`
if (process.argv[1]?.endsWith('cpu-profile-summary.ts')) {
  const [file, creates = '1', cpu, top = '30'] = process.argv.slice(2);
  if (!file) throw new Error('usage: tsx bench/cpu-profile-summary.ts <file.cpuprofile> <creates> [cpu ms per create] [top]');
  process.stdout.write(`${profileReport(file, Number(creates), cpu ? Number(cpu) : undefined, Number(top)).join('\n')}\n`);
}

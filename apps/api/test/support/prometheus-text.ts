/**
 * A small, strict reader of the Prometheus text exposition format (0.0.4), enough to check what /metrics
 * serves: `# HELP`/`# TYPE` lines, samples with escaped label values, and the shape of histograms.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** Family name → declared type. */
  types: Map<string, MetricType>;
  help: Map<string, string>;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Go's ParseFloat, as Prometheus reads values: special values in any case (prom-client writes `Nan`). */
function parseValue(text: string, line: number): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value ${JSON.stringify(text)}`);
  return Number(text);
}

/** `{a="x",b="y\"z"}` starting at `at` (the `{`); returns the labels and the index after `}`. */
function parseLabels(text: string, at: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = at + 1;
  for (;;) {
    if (text[i] === '}') return { labels, end: i + 1 };
    const eq = text.indexOf('=', i);
    if (eq === -1) throw new Error(`line ${line}: label without '='`);
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: bad label name ${JSON.stringify(name)}`);
    if (name in labels) throw new Error(`line ${line}: label ${name} repeated`);
    if (text[eq + 1] !== '"') throw new Error(`line ${line}: label value not quoted`);
    let value = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const next = text[++j];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`line ${line}: bad escape \\${next}`);
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`line ${line}: unterminated label value`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i += 1;
    else if (text[i] !== '}') throw new Error(`line ${line}: expected ',' or '}' after a label`);
  }
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, MetricType>();
  const help = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!match) return; // an ordinary comment
      const [, kind, name, rest] = match;
      if (!NAME.test(name!)) throw new Error(`line ${line}: bad metric name ${name}`);
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest!)) throw new Error(`line ${line}: bad type ${rest}`);
        if (types.has(name!)) throw new Error(`line ${line}: TYPE of ${name} given twice`);
        types.set(name!, rest as MetricType);
      } else help.set(name!, rest!);
      return;
    }
    const nameEnd = raw.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`line ${line}: no sample name`);
    const name = raw.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
    let labels: Record<string, string> = {};
    let rest = raw.slice(nameEnd);
    if (rest.startsWith('{')) {
      const parsed = parseLabels(raw, nameEnd, line);
      labels = parsed.labels;
      rest = raw.slice(parsed.end);
    }
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === '') throw new Error(`line ${line}: expected a value and an optional timestamp`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`line ${line}: bad timestamp`);
    samples.push({ name, labels, value: parseValue(fields[0]!, line) });
  });
  checkHistograms(types, samples);
  return { types, help, samples };
}

/** The family a sample belongs to: `x_bucket` → `x` when `x` is a declared histogram. */
export function familyOf(sampleName: string, types: Map<string, MetricType>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const base = sampleName.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return sampleName;
}

function seriesKey(labels: Record<string, string>, without: string): string {
  return JSON.stringify(Object.entries(labels).filter(([k]) => k !== without).sort());
}

/** Every histogram series: buckets cumulative (non-decreasing in `le`), a `+Inf` bucket equal to `_count`. */
function checkHistograms(types: Map<string, MetricType>, samples: Sample[]): void {
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    const series = new Map<string, Array<{ le: number; value: number }>>();
    for (const s of samples.filter((x) => x.name === `${family}_bucket`)) {
      if (s.labels.le === undefined) throw new Error(`${family}_bucket without le`);
      const key = seriesKey(s.labels, 'le');
      series.set(key, [...(series.get(key) ?? []), { le: parseValue(s.labels.le, 0), value: s.value }]);
    }
    for (const [key, buckets] of series) {
      buckets.sort((a, b) => a.le - b.le);
      for (let i = 1; i < buckets.length; i++) {
        if (buckets[i]!.value < buckets[i - 1]!.value) throw new Error(`${family} ${key}: buckets not cumulative`);
      }
      const inf = buckets.at(-1);
      if (!inf || inf.le !== Infinity) throw new Error(`${family} ${key}: no +Inf bucket`);
      const count = samples.find((x) => x.name === `${family}_count` && seriesKey(x.labels, 'le') === key);
      if (!count || count.value !== inf.value) throw new Error(`${family} ${key}: _count differs from the +Inf bucket`);
    }
  }
}

/** The value of one sample (labels must match exactly the ones given; others may be present), 0 when absent. */
export function sampleValue(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.reduce((sum, s) => sum + s.value, 0);
}

/**
 * Every series name a query can use against this scrape: sample names, declared counters and gauges (a labelled
 * family exists before its first series), and a histogram's `_bucket`/`_sum`/`_count` (never its bare name).
 */
export function exposedNames(exposition: Exposition): Set<string> {
  const names = new Set(exposition.samples.map((s) => s.name));
  for (const [family, type] of exposition.types) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(family + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(family + suffix);
    else names.add(family);
  }
  return names;
}

import { describe, expect, it } from 'vitest';
import { metricNamesIn } from './promql-names.ts';
import { exposedNames, parseExposition, sampleValue } from './prometheus-text.ts';

describe('metricNamesIn', () => {
  it('finds names, not functions, aggregations, label names, durations or strings', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, operation) (rate(tidepool_x_bucket{operation="create", outcome=~"succ.*"}[5m]))) > 30',
      ),
    ).toEqual(['tidepool_x_bucket']);
    expect(
      metricNamesIn('sum(rate(a_total{outcome="error"}[10m])) / clamp_min(sum(rate(a_total[10m])) without (instance), 1) > 0.1'),
    ).toEqual(['a_total']);
    expect(metricNamesIn('max_over_time(up[1h30m:1m] offset 5m) == 0 and on(job) b unless ignoring(x) c')).toEqual(['up', 'b', 'c']);
    expect(metricNamesIn('sum without (pod) (increase(d_total[$__rate_interval])) or vector(0)')).toEqual(['d_total']);
    expect(metricNamesIn('e / on(instance) group_left(version) f{job=~"$job"} * 1e3')).toEqual(['e', 'f']);
    expect(metricNamesIn('count(g) by (state) > bool 2 # a comment naming h')).toEqual(['g']);
    expect(metricNamesIn("rate(x{a='}{'}[${interval}])")).toEqual(['x']);
  });

  it('refuses what it cannot read', () => {
    expect(() => metricNamesIn('rate(x{a="unterminated}[5m])')).toThrow(/unterminated/);
  });
});

describe('parseExposition', () => {
  const text = [
    '# HELP t_ops_seconds Ops.',
    '# TYPE t_ops_seconds histogram',
    't_ops_seconds_bucket{le="0.1",op="a"} 1',
    't_ops_seconds_bucket{le="+Inf",op="a"} 3',
    't_ops_seconds_sum{op="a"} 0.75',
    't_ops_seconds_count{op="a"} 3',
    '# HELP t_errors_total Errors.',
    '# TYPE t_errors_total counter',
    '# TYPE t_up gauge',
    't_up{path="a \\"quoted\\" \\\\ value\\n"} 1 1700000000000',
    '',
  ].join('\n');

  it('reads samples, escapes, types and histogram series', () => {
    const parsed = parseExposition(text);
    expect(parsed.types.get('t_ops_seconds')).toBe('histogram');
    expect(sampleValue(parsed, 't_ops_seconds_count', { op: 'a' })).toBe(3);
    expect(parsed.samples.find((s) => s.name === 't_up')?.labels.path).toBe('a "quoted" \\ value\n');
    expect([...exposedNames(parsed)].sort()).toEqual(['t_errors_total', 't_ops_seconds_bucket', 't_ops_seconds_count', 't_ops_seconds_sum', 't_up']);
  });

  it('refuses malformed lines and inconsistent histograms', () => {
    expect(() => parseExposition('x{a="b} 1\n')).toThrow();
    expect(() => parseExposition('x{a=b} 1\n')).toThrow(/quoted/);
    expect(() => parseExposition('x one\n')).toThrow(/bad value/);
    expect(() => parseExposition(text.replace('t_ops_seconds_count{op="a"} 3', 't_ops_seconds_count{op="a"} 4'))).toThrow(/_count/);
    expect(() => parseExposition(text.replace('le="0.1",op="a"} 1', 'le="0.1",op="a"} 5'))).toThrow(/cumulative/);
  });
});

/**
 * The metric names a PromQL expression reads, found by a small tokenizer (promtool is not available):
 * identifiers that are not functions, aggregations, keywords, label names (in `{…}` matchers and in
 * `by`/`without`/`on`/`ignoring`/`group_*` lists), durations, numbers, strings or Grafana variables.
 */

type Token = { kind: 'ident' | 'number' | 'punct'; text: string };

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or', 'unless', 'atan2', 'inf', 'nan', 'start', 'end']);
const LABEL_LIST_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const AGGREGATIONS = new Set(['sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio']);

const IDENT = /[a-zA-Z_][a-zA-Z0-9_:]*/y;
// Numbers and durations (`5m`, `1h30m`, `250ms`, `1.5e3`, `0x1f`).
const NUMBER = /(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)((ms|[smhdwy])(\d+(ms|[smhdwy]))*)?/y;
const GRAFANA_VARIABLE = /\$(\{[^}]*\}|\[\[[^\]]*\]\]|[a-zA-Z_][a-zA-Z0-9_]*)/y;

export function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const sticky = (re: RegExp): string | undefined => {
    re.lastIndex = i;
    const m = re.exec(expr);
    return m ? m[0] : undefined;
  };
  while (i < expr.length) {
    const c = expr[i]!;
    if (/\s/.test(c)) {
      i += 1;
    } else if (c === '"' || c === "'" || c === '`') {
      // Strings (label values, regexes) hold no names.
      let j = i + 1;
      while (j < expr.length && expr[j] !== c) j += c !== '`' && expr[j] === '\\' ? 2 : 1;
      if (j >= expr.length) throw new Error(`unterminated string in ${expr}`);
      i = j + 1;
    } else if (c === '#') {
      const end = expr.indexOf('\n', i);
      i = end === -1 ? expr.length : end + 1;
    } else if (c === '$') {
      const variable = sticky(GRAFANA_VARIABLE);
      if (!variable) throw new Error(`stray $ in ${expr}`);
      tokens.push({ kind: 'number', text: variable });
      i += variable.length;
    } else if (/[0-9.]/.test(c) && sticky(NUMBER)) {
      const number = sticky(NUMBER)!;
      tokens.push({ kind: 'number', text: number });
      i += number.length;
    } else if (sticky(IDENT)) {
      const ident = sticky(IDENT)!;
      tokens.push({ kind: 'ident', text: ident });
      i += ident.length;
    } else {
      tokens.push({ kind: 'punct', text: c });
      i += 1;
    }
  }
  return tokens;
}

export function metricNamesIn(expr: string): string[] {
  const tokens = tokenize(expr);
  const names = new Set<string>();
  let braces = 0;
  for (let t = 0; t < tokens.length; t++) {
    const token = tokens[t]!;
    if (token.kind === 'punct') {
      if (token.text === '{') braces += 1;
      if (token.text === '}') braces -= 1;
      continue;
    }
    if (token.kind !== 'ident' || braces > 0) continue;
    const next = tokens[t + 1];
    if (LABEL_LIST_KEYWORDS.has(token.text) && next?.text === '(') {
      // Skip the label list up to its `)`.
      let depth = 0;
      for (t += 1; t < tokens.length; t++) {
        if (tokens[t]!.text === '(') depth += 1;
        if (tokens[t]!.text === ')' && --depth === 0) break;
      }
      continue;
    }
    if (KEYWORDS.has(token.text.toLowerCase()) || AGGREGATIONS.has(token.text)) continue;
    if (next?.text === '(') continue; // a function call
    names.add(token.text);
  }
  return [...names];
}

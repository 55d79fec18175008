/**
 * `ENV` values may refer to variables set before (`PATH=/opt/venv/bin:$PATH`), as in a Dockerfile:
 * `$NAME`, `${NAME}`, `${NAME:-default}`, `${NAME:+alternative}`; `\$` is a literal dollar.
 * Unknown variables expand to nothing.
 */

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

export function expandEnvValue(value: string, lookup: (name: string) => string | undefined): string {
  let out = '';
  let i = 0;
  while (i < value.length) {
    const char = value[i];
    if (char === '\\' && value[i + 1] === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (char !== '$') {
      out += char;
      i += 1;
      continue;
    }
    if (value[i + 1] === '{') {
      const close = value.indexOf('}', i + 2);
      if (close < 0) {
        out += value.slice(i);
        break;
      }
      out += expandBraced(value.slice(i + 2, close), lookup);
      i = close + 1;
      continue;
    }
    const name = NAME.exec(value.slice(i + 1))?.[0];
    if (!name) {
      out += '$';
      i += 1;
      continue;
    }
    out += lookup(name) ?? '';
    i += 1 + name.length;
  }
  return out;
}

function expandBraced(inner: string, lookup: (name: string) => string | undefined): string {
  const name = NAME.exec(inner)?.[0];
  if (!name) return `\${${inner}}`;
  const rest = inner.slice(name.length);
  const current = lookup(name);
  if (rest === '') return current ?? '';
  if (rest.startsWith(':-')) return current ? current : rest.slice(2);
  if (rest.startsWith(':+')) return current ? rest.slice(2) : '';
  return `\${${inner}}`;
}

/** `["A=1", "B=x=y"]` (an image's Env) as a record. */
export function envListToRecord(list: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (const entry of list) {
    const eq = entry.indexOf('=');
    if (eq > 0) record[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return record;
}

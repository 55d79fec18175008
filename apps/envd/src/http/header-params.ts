/**
 * Parsing of `type; name=value; name="quoted value"` header values (Content-Type, Content-Disposition),
 * with RFC 8187 extended parameters (`filename*=UTF-8''%2Fhome%2Fa.txt`) taking precedence over the
 * plain ones. Parameter names are lower-cased; the first occurrence of a name wins.
 */
export interface HeaderValue {
  /** The lower-cased value before the first `;`, e.g. `multipart/form-data` or `form-data`. */
  type: string;
  params: Map<string, string>;
}

const SEPARATORS = new Set([';', ' ', '\t']);

/** The octets of a percent-encoded string; characters that are not `%XX` stand for their UTF-8 bytes. */
function percentDecode(text: string): Buffer {
  const parts: Buffer[] = [];
  let i = 0;
  while (i < text.length) {
    const escape = /^%[0-9a-fA-F]{2}/.exec(text.slice(i, i + 3));
    if (escape) {
      parts.push(Buffer.of(parseInt(text.slice(i + 1, i + 3), 16)));
      i += 3;
      continue;
    }
    const next = text.indexOf('%', i + 1);
    const end = next < 0 ? text.length : next;
    parts.push(Buffer.from(text.slice(i, end), 'utf8'));
    i = end;
  }
  return Buffer.concat(parts);
}

/** Decodes `charset'language'percent-encoded` (UTF-8 or ISO-8859-1); undefined otherwise. */
function decodeExtendedValue(raw: string): string | undefined {
  const match = /^([^']*)'[^']*'(.*)$/s.exec(raw);
  if (!match) return undefined;
  const charset = match[1].toLowerCase();
  if (charset === 'utf-8') return percentDecode(match[2]).toString('utf8');
  if (charset === 'iso-8859-1') return percentDecode(match[2]).toString('latin1');
  return undefined;
}

/** Reads a quoted string starting at the opening quote; `\"` and `\\` are unescaped, other backslashes kept. */
function readQuoted(value: string, start: number): { text: string; end: number } {
  let text = '';
  let i = start + 1;
  while (i < value.length && value[i] !== '"') {
    if (value[i] === '\\' && (value[i + 1] === '"' || value[i + 1] === '\\')) i++;
    text += value[i];
    i++;
  }
  return { text, end: i + 1 };
}

/** Parses a header value; undefined when it has no type. Malformed trailing parameters are dropped. */
export function parseHeaderValue(value: string): HeaderValue | undefined {
  const semicolon = value.indexOf(';');
  const type = (semicolon < 0 ? value : value.slice(0, semicolon)).trim().toLowerCase();
  if (type === '') return undefined;
  const plain = new Map<string, string>();
  const extended = new Map<string, string>();
  let i = semicolon < 0 ? value.length : semicolon;
  while (i < value.length) {
    while (i < value.length && SEPARATORS.has(value[i])) i++;
    const equals = value.indexOf('=', i);
    if (equals < 0) break;
    const name = value.slice(i, equals).trim().toLowerCase();
    if (name === '' || /[\s;"]/.test(name)) break;
    let text: string;
    if (value[equals + 1] === '"') {
      const quoted = readQuoted(value, equals + 1);
      text = quoted.text;
      i = quoted.end;
    } else {
      const end = value.indexOf(';', equals + 1);
      text = value.slice(equals + 1, end < 0 ? value.length : end).trim();
      i = end < 0 ? value.length : end;
    }
    if (name.endsWith('*')) {
      const decoded = decodeExtendedValue(text);
      const base = name.slice(0, -1);
      if (decoded !== undefined && !extended.has(base)) extended.set(base, decoded);
    } else if (!plain.has(name)) {
      plain.set(name, text);
    }
  }
  for (const [name, text] of extended) plain.set(name, text);
  return { type, params: plain };
}

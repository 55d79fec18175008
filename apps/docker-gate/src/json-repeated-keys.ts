/**
 * A small JSON scanner that finds a key repeated within one object. JSON.parse keeps the last of repeated
 * keys, but the engine's Go decoder fills a struct field once per occurrence, merging repeated objects, and
 * matches field names case-insensitively: `{"HostConfig":{"Privileged":true},"hostconfig":{}}` looks empty to
 * JSON.parse and is privileged to the engine. The gate refuses any body where this scanner finds a repeat.
 */
export class JsonScanError extends Error {}

/** Keys the engine could take for one field: Go folds case (and `ſ`/`K`-like letters); over-folding only refuses more. */
function foldKey(key: string): string {
  return key.toUpperCase().toLowerCase();
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const SIMPLE_ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

class Scanner {
  private at = 0;

  constructor(
    private readonly text: string,
    private readonly maxDepth: number,
  ) {}

  /** The path of the first repeated key (`HostConfig.binds`), or undefined. Throws JsonScanError on malformed JSON. */
  scan(): string | undefined {
    const repeated = this.value(0, '');
    if (repeated !== undefined) return repeated;
    this.skipWhitespace();
    if (this.at !== this.text.length) this.fail('text after the JSON value');
    return undefined;
  }

  private fail(what: string): never {
    throw new JsonScanError(`malformed JSON at offset ${this.at}: ${what}`);
  }

  private skipWhitespace(): void {
    while (this.at < this.text.length && WHITESPACE.has(this.text.charCodeAt(this.at))) this.at++;
  }

  private value(depth: number, path: string): string | undefined {
    this.skipWhitespace();
    const c = this.text[this.at];
    if (c === '{' || c === '[') {
      if (depth >= this.maxDepth) this.fail(`nested deeper than ${this.maxDepth}`);
      return c === '{' ? this.object(depth + 1, path) : this.array(depth + 1, path);
    }
    if (c === '"') {
      this.string(false);
      return undefined;
    }
    for (const literal of ['true', 'false', 'null']) {
      if (this.text.startsWith(literal, this.at)) {
        this.at += literal.length;
        return undefined;
      }
    }
    NUMBER.lastIndex = this.at;
    if (!NUMBER.exec(this.text)) this.fail('expected a value');
    this.at = NUMBER.lastIndex;
    return undefined;
  }

  private object(depth: number, path: string): string | undefined {
    this.at++;
    const keys = new Set<string>();
    this.skipWhitespace();
    if (this.text[this.at] === '}') {
      this.at++;
      return undefined;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.at] !== '"') this.fail('expected a key');
      const key = this.string(true);
      const here = path ? `${path}.${key}` : key;
      const folded = foldKey(key);
      if (keys.has(folded)) return here;
      keys.add(folded);
      this.skipWhitespace();
      if (this.text[this.at] !== ':') this.fail('expected ":"');
      this.at++;
      const repeated = this.value(depth, here);
      if (repeated !== undefined) return repeated;
      this.skipWhitespace();
      const next = this.text[this.at++];
      if (next === '}') return undefined;
      if (next !== ',') this.fail('expected "," or "}"');
    }
  }

  private array(depth: number, path: string): string | undefined {
    this.at++;
    this.skipWhitespace();
    if (this.text[this.at] === ']') {
      this.at++;
      return undefined;
    }
    for (let index = 0; ; index++) {
      const repeated = this.value(depth, `${path}[${index}]`);
      if (repeated !== undefined) return repeated;
      this.skipWhitespace();
      const next = this.text[this.at++];
      if (next === ']') return undefined;
      if (next !== ',') this.fail('expected "," or "]"');
    }
  }

  /** Reads a string at the opening quote; its decoded text when `keep`. */
  private string(keep: boolean): string {
    this.at++;
    let out = '';
    for (;;) {
      if (this.at >= this.text.length) this.fail('unterminated string');
      const code = this.text.charCodeAt(this.at);
      if (code === 0x22) {
        this.at++;
        return out;
      }
      if (code < 0x20) this.fail('control character in a string');
      if (code !== 0x5c) {
        if (keep) out += this.text[this.at];
        this.at++;
        continue;
      }
      const escape = this.text[this.at + 1] ?? '';
      if (escape === 'u') {
        const hex = this.text.slice(this.at + 2, this.at + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
        if (keep) out += String.fromCharCode(parseInt(hex, 16));
        this.at += 6;
      } else if (Object.hasOwn(SIMPLE_ESCAPES, escape)) {
        if (keep) out += SIMPLE_ESCAPES[escape];
        this.at += 2;
      } else this.fail('bad escape');
    }
  }
}

/**
 * The path of the first key repeated within one object of `text` (compared the way the engine matches
 * field names: case-insensitively, escapes decoded), or undefined. Throws JsonScanError on malformed JSON
 * or nesting deeper than `maxDepth`.
 */
export function firstRepeatedKey(text: string, maxDepth = 64): string | undefined {
  return new Scanner(text, maxDepth).scan();
}

import { Prng } from '@tidepool/testkit';

export { Prng };

/** JSON texts of the wrong type (or out of range) for any field. */
export const WRONG_JSON_VALUES = [
  '123',
  '-1',
  '1.5',
  'true',
  'null',
  '[]',
  '{}',
  '"x"',
  '""',
  '1e999',
  '-9223372036854775809',
  '18446744073709551616',
  '4294967296',
  '"NaN"',
  '"Infinity"',
  '[1,2,3]',
  '{"a":1}',
  '"\\u0000"',
  '"\\ud800"',
  '"SIGNAL_BOGUS"',
  '99999',
  '"not base64 !!"',
  '[[[[[[[[[[]]]]]]]]]]',
];

/** Numbers around the edges of int32/uint32 (for pids, sizes, depths, signals). */
export const EDGE_NUMBERS = [0, 1, -1, 65535, 65536, 2147483647, 2147483648, -2147483648, 4294967295, 4194305, 999999];

/** Malformed JSON documents. */
export const MALFORMED_JSON = ['{', '}', '{"path":', '{"path":"a"', '{"a":1,}', "{'path':'x'}", 'nul', '[', '"', '{"path":"a"}garbage', '\u0000', '{"process":{"pid":1}}}', ' '];

/** Invalid UTF-8 sequences (lone continuation, overlong, surrogate, truncated, out of range). */
export const INVALID_UTF8 = [Buffer.of(0xff), Buffer.of(0x80), Buffer.of(0xc0, 0xaf), Buffer.of(0xed, 0xa0, 0x80), Buffer.of(0xe2, 0x82), Buffer.of(0xf4, 0x90, 0x80, 0x80)];

/** Replaces the JSON value at a dotted path of an object (JSON text out, with a raw JSON value in). */
export function replaceJsonField(template: unknown, path: string, rawValue: string): string {
  const marker = `__FUZZ_${Math.random().toString(36).slice(2)}__`;
  const copy = JSON.parse(JSON.stringify(template)) as Record<string, unknown>;
  const keys = path.split('.');
  let node: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[keys.at(-1)!] = marker;
  return JSON.stringify(copy).replace(`"${marker}"`, rawValue);
}

/** Every dotted path of the leaves and objects of a JSON template. */
export function fieldPaths(template: unknown, prefix = ''): string[] {
  if (typeof template !== 'object' || template === null || Array.isArray(template)) return [];
  const out: string[] = [];
  for (const [key, value] of Object.entries(template)) {
    const path = prefix ? `${prefix}.${key}` : key;
    out.push(path, ...fieldPaths(value, path));
  }
  return out;
}

/** Protobuf varint encoding of a non-negative bigint. */
export function varint(value: bigint): Buffer {
  const out: number[] = [];
  let v = value;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return Buffer.from(out);
}

/** A length-delimited field (wire type 2). */
export function lenField(field: number, payload: Buffer, declared = BigInt(payload.length)): Buffer {
  return Buffer.concat([varint(BigInt((field << 3) | 2)), varint(declared), payload]);
}

/** A varint field (wire type 0); negative values as 10-byte two's complement like int32 on the wire. */
export function varintField(field: number, value: bigint): Buffer {
  const unsigned = value < 0n ? (1n << 64n) + value : value;
  return Buffer.concat([varint(BigInt(field << 3)), varint(unsigned)]);
}

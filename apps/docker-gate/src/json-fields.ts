/**
 * The engine decodes request bodies with Go's encoding/json, which matches object keys to struct fields
 * case-insensitively (`privileged` fills `Privileged`; with duplicates the last one wins) and with Unicode
 * folding (`ſ` matches `s`, the Kelvin sign matches `k`). The gate reads bodies the same way: keys are
 * folded to lower case, later keys overwrite earlier ones, and any key outside ASCII is refused outright.
 */
export type JsonObject = Record<string, unknown>;

export class BodyError extends Error {}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object's fields keyed by lower-cased name, as Go would see them. Throws BodyError on non-ASCII keys. */
export function foldFields(value: unknown, where: string): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  if (value === undefined || value === null) return fields;
  if (!isObject(value)) throw new BodyError(`${where} must be an object`);
  for (const [key, field] of Object.entries(value)) {
    if (!/^[\x20-\x7e]*$/.test(key)) throw new BodyError(`${where}: field names must be ASCII (got ${JSON.stringify(key)})`);
    fields.set(key.toLowerCase(), field);
  }
  return fields;
}

/**
 * A field the gate does not know is acceptable only unset: absent, null, or a scalar zero value ('', 0, false).
 * An empty list or object is not "nothing asked" for Go: a non-nil empty slice is a value (`MaskedPaths: []`
 * unmasks /proc, `ReadonlyPaths: []` leaves /proc/sys writable), so it counts as set.
 */
export function isUnset(value: unknown): boolean {
  return value === undefined || value === null || value === '' || value === 0 || value === false;
}

/** null, undefined, '', 0, false, [] and {} are what Go leaves as the zero value: nothing asked for. */
export function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === '' || value === 0 || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (isObject(value)) return Object.keys(value).length === 0;
  return false;
}

export function stringList(value: unknown, where: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) throw new BodyError(`${where} must be a list of strings`);
  return value as string[];
}

export function optionalString(value: unknown, where: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new BodyError(`${where} must be a string`);
  return value;
}

import { invalid } from '../errors.ts';

/** Identifiers the platform gives secrets; names may not take this prefix (reference: `sec_` is reserved). */
export const SECRET_ID_PREFIX = 'sec_';
const SECRET_ID_PATTERN = /^sec_[0-9a-f]{24}$/;
const NAME_PATTERN = /^[a-z0-9_-]+$/;
export const MAX_NAME_LENGTH = 128;
/** Largest secret value (UTF-8 bytes): tokens, keys and certificates fit; bulk data does not belong here. */
export const MAX_VALUE_BYTES = 64 * 1024;
export const MAX_METADATA_ENTRIES = 32;
export const MAX_METADATA_KEY_BYTES = 128;
export const MAX_METADATA_VALUE_BYTES = 1024;
export const MAX_METADATA_BYTES = 8192;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const quoted = (text: string): string => JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);

/**
 * A secret name as stored: lower-cased, 1–128 of `a-z 0-9 _ -` (it is written into `${e2b.secrets.<name>}`
 * placeholders), never starting with the identifier prefix.
 */
export function canonicalSecretName(raw: string): string {
  const name = raw.toLowerCase();
  if (name.length === 0 || name.length > MAX_NAME_LENGTH || !NAME_PATTERN.test(name)) {
    throw invalid(`secret name ${quoted(raw)} is not valid: use 1-${MAX_NAME_LENGTH} letters, digits, '_' or '-'`);
  }
  if (name.startsWith(SECRET_ID_PREFIX)) throw invalid(`secret name ${quoted(raw)} is not valid: the '${SECRET_ID_PREFIX}' prefix is reserved for secret identifiers`);
  return name;
}

export function isSecretId(text: string): boolean {
  return SECRET_ID_PATTERN.test(text);
}

/** Which row an `{secretID}` path segment selects: an identifier, or a name (any case). */
export function secretReference(raw: string): { secretId: string } | { name: string } {
  if (raw.toLowerCase().startsWith(SECRET_ID_PREFIX)) {
    if (!isSecretId(raw)) throw invalid(`secret identifier ${quoted(raw)} is not valid: identifiers are '${SECRET_ID_PREFIX}' and 24 hex digits`);
    return { secretId: raw };
  }
  return { name: canonicalSecretName(raw) };
}

/** A secret value: non-empty and at most MAX_VALUE_BYTES (the message never repeats the value). */
export function checkSecretValue(value: string): void {
  if (value.length === 0) throw invalid('secret value must not be empty');
  // A lone surrogate would be stored as U+FFFD: a different value than the one sent.
  if (LONE_SURROGATE.test(value)) throw invalid('secret value must be valid Unicode text (it has an unpaired surrogate)');
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > MAX_VALUE_BYTES) throw invalid(`secret value is ${bytes} bytes; at most ${MAX_VALUE_BYTES} bytes are allowed`);
}

/** Customer metadata: at most 32 entries, keys 1–128 bytes, values ≤1024 bytes, ≤8192 bytes in all. */
export function checkSecretMetadata(metadata: Record<string, string>): void {
  const entries = Object.entries(metadata);
  if (entries.length > MAX_METADATA_ENTRIES) throw invalid(`secret metadata has ${entries.length} entries; at most ${MAX_METADATA_ENTRIES} are allowed`);
  let total = 0;
  for (const [key, value] of entries) {
    const keyBytes = Buffer.byteLength(key, 'utf8');
    const valueBytes = Buffer.byteLength(value, 'utf8');
    if (keyBytes === 0 || keyBytes > MAX_METADATA_KEY_BYTES) throw invalid(`secret metadata key ${quoted(key)} must be 1-${MAX_METADATA_KEY_BYTES} bytes`);
    if (valueBytes > MAX_METADATA_VALUE_BYTES) throw invalid(`secret metadata value of ${quoted(key)} is ${valueBytes} bytes; at most ${MAX_METADATA_VALUE_BYTES} are allowed`);
    total += keyBytes + valueBytes;
  }
  if (total > MAX_METADATA_BYTES) throw invalid(`secret metadata is ${total} bytes; at most ${MAX_METADATA_BYTES} are allowed in all`);
}

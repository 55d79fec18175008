/**
 * Readers of raw environment values. A value that is not of the expected form is returned as it came, so that
 * validation names the variable and shows what it got.
 */

/** The trimmed value, '' when unset. */
export function text(raw: string | undefined): string {
  return (raw ?? '').trim();
}

/** An integer; unset or empty: the fallback. */
export function integer(raw: string | undefined, fallback: number): number | string {
  if (raw === undefined || raw === '') return fallback;
  return /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw;
}

/** A comma list of integers; an entry that is not one is kept as it came (an empty one becomes NaN, refused too). */
export function integerList(raw: string | undefined, fallback: number[]): Array<number | string> {
  if (raw === undefined || raw.trim() === '') return fallback;
  return raw.split(',').map((entry) => integer(entry.trim(), Number.NaN));
}

/** A comma list, entries trimmed, empty ones dropped. */
export function list(raw: string | undefined): string[] {
  return (raw ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
}

/** on/off words (also 1/0, true/false, yes/no); unset or empty: the fallback. */
export function flag(raw: string | undefined, fallback: boolean): boolean | string {
  const value = (raw ?? '').trim().toLowerCase();
  if (value === '') return fallback;
  if (['1', 'true', 'on', 'yes'].includes(value)) return true;
  if (['0', 'false', 'off', 'no'].includes(value)) return false;
  return raw as string;
}

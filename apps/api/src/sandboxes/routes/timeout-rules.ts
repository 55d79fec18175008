import { PlatformError } from '../../errors.ts';

/** Timeout settings every route that takes a `timeout` shares (from the config). */
export interface TimeoutRules {
  defaultSeconds: number;
  maxSeconds: number;
}

function describeMax(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} hours`;
  return `${seconds} seconds`;
}

/** Rejects a timeout above the configured maximum, with the reference platform's wording. */
export function checkMaxTimeout(rules: TimeoutRules, timeout: number): number {
  if (timeout > rules.maxSeconds) throw new PlatformError('invalid', `Timeout cannot be greater than ${describeMax(rules.maxSeconds)}`);
  return timeout;
}

/** Create and resume: omitted → default; ≤ 0 → 400; above the maximum → 400. */
export function positiveTimeout(rules: TimeoutRules, timeout: number | undefined): number {
  const value = timeout ?? rules.defaultSeconds;
  if (value <= 0) throw new PlatformError('invalid', 'Timeout must be greater than 0');
  return checkMaxTimeout(rules, value);
}

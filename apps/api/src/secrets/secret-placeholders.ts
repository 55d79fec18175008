import { invalid } from '../errors.ts';

/** `${e2b.secrets.<name>}` as `Secret.fill(name)` writes it; the name is whatever stands before the `}`. */
const PLACEHOLDER = /\$\{e2b\.secrets\.([^}]*)\}/g;

/** Every secret name a `network.rules` value refers to in its transforms' header values (in order, once each). */
export function secretNamesInRules(rules: unknown): string[] {
  const names = new Set<string>();
  if (rules === null || typeof rules !== 'object') return [];
  for (const list of Object.values(rules as Record<string, unknown>)) {
    if (!Array.isArray(list)) continue;
    for (const rule of list) {
      const headers = (rule as { transform?: { headers?: unknown } } | null)?.transform?.headers;
      if (headers === null || typeof headers !== 'object') continue;
      for (const value of Object.values(headers as Record<string, unknown>)) {
        if (typeof value !== 'string') continue;
        for (const match of value.matchAll(PLACEHOLDER)) names.add(match[1]!);
      }
    }
  }
  return [...names];
}

/** 400 naming each secret the rules refer to that does not exist (checked before anything is made). */
export function requireKnownSecrets(rules: unknown, exists: (name: string) => boolean): void {
  const unknown = secretNamesInRules(rules).filter((name) => !exists(name));
  if (unknown.length === 0) return;
  const listed = unknown.slice(0, 10).map((name) => JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name)).join(', ');
  throw invalid(`network.rules refers to ${unknown.length === 1 ? 'an unknown secret' : 'unknown secrets'} ${listed}${unknown.length > 10 ? ` and ${unknown.length - 10} more` : ''}: create ${unknown.length === 1 ? 'it' : 'them'} first (Secret.create)`);
}

/**
 * `requireKnownSecrets` against the store: `storedNames` (every stored secret name, lower-case) is read once, and
 * only when the rules use a placeholder at all, so a request naming thousands of secrets costs one query.
 */
export async function requireStoredSecrets(rules: unknown, storedNames: () => Promise<ReadonlySet<string>>): Promise<void> {
  if (secretNamesInRules(rules).length === 0) return;
  const stored = await storedNames();
  requireKnownSecrets(rules, (name) => stored.has(name.toLowerCase()));
}

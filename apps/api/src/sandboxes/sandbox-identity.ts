import { createHmac, randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** `i` + 20 characters of [a-z0-9], like the reference platform's sandbox ids. */
export function newSandboxId(): string {
  return `i${Array.from(randomBytes(20), (b) => ALPHABET[b % ALPHABET.length]).join('')}`;
}

/** Path parameters may carry the legacy `-<clientID>` suffix: the id is what comes before it. */
export function normalizeSandboxId(raw: string): string {
  return raw.split('-', 1)[0];
}

/**
 * A sandbox's envd token, derived from the platform seed: it survives platform restarts, pauses and
 * resumes (also from disk) unchanged, because SDK objects keep the token they were created with.
 */
export function envdAccessToken(seed: string, sandboxId: string): string {
  return createHmac('sha256', seed).update(sandboxId).digest('hex');
}

export function trafficAccessToken(seed: string, sandboxId: string): string {
  return createHmac('sha256', seed).update(`sandbox-traffic-${sandboxId}`).digest('hex');
}


/**
 * The secret values a node agent's egress proxy puts into the requests of sandboxes with network.rules. The API
 * resolves the secrets a sandbox's rules name and pushes their values here over the mutual-TLS channel (egress-routes.ts),
 * for that sandbox alone; they are kept in this process's memory only (never logged, never written), replaced whole
 * by each push and dropped when the sandbox is forgotten. A restarted agent has none: its proxy answers 502 to the
 * sandbox's ruled requests until the API pushes them again.
 */
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import { canonicalSecretName, MAX_NAME_LENGTH, MAX_VALUE_BYTES } from '../secrets/secret-rules.ts';
/** Most secrets one push may carry (a sandbox's rules name few; 1 MiB bodies bound the rest). */
export const MAX_PUSHED_SECRETS = 1024;

const badCall = (message: string): NodeChannelError => new NodeChannelError('bad_call', message);

/** A pushed name must be one the secrets store can hold, exactly as it keeps it (canonicalSecretName). */
function storedName(name: string): string {
  try {
    if (canonicalSecretName(name) === name) return name;
  } catch {
    // answered below, in the push's own words
  }
  throw badCall(`egress push: ${JSON.stringify(name.slice(0, 80))} is not a secret name (1-${MAX_NAME_LENGTH} of a-z 0-9 _ -)`);
}

/** Checks a push body, `{"secrets": {"<name>": "<value>", …}}`, and returns its secrets (a bad_call error otherwise). */
export function parseSecretPush(body: unknown): Map<string, string> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badCall('egress push: the body must be {"secrets": {name: value}}');
  const extra = Object.keys(body).find((key) => key !== 'secrets');
  if (extra !== undefined) throw badCall(`egress push: unexpected field ${JSON.stringify(extra.slice(0, 64))}`);
  const secrets = (body as { secrets?: unknown }).secrets;
  if (typeof secrets !== 'object' || secrets === null || Array.isArray(secrets)) throw badCall('egress push: "secrets" must be an object of secret names to values');
  const entries = Object.entries(secrets);
  if (entries.length > MAX_PUSHED_SECRETS) throw badCall(`egress push: at most ${MAX_PUSHED_SECRETS} secrets (got ${entries.length})`);
  const parsed = new Map<string, string>();
  for (const [name, value] of entries) {
    // The name may be shown (it is in the sandbox's rules); a value never is, not even its length.
    storedName(name);
    if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value, 'utf8') > MAX_VALUE_BYTES) throw badCall(`egress push: the value of secret "${name}" must be a string of 1 byte to ${MAX_VALUE_BYTES / 1024} KiB`);
    parsed.set(name, value);
  }
  return parsed;
}

/** Pushed secret values by sandbox, in memory only. */
export class EgressSecretStore {
  private readonly bySandbox = new Map<string, ReadonlyMap<string, string>>();

  /** Replaces the sandbox's secrets (a push carries all of them: a secret left out is gone). */
  set(sandboxId: string, secrets: ReadonlyMap<string, string>): void {
    if (secrets.size === 0) this.bySandbox.delete(sandboxId);
    else this.bySandbox.set(sandboxId, new Map(secrets));
  }

  /** The value of the sandbox's secret `name` (any case), or undefined when none was pushed for this sandbox. */
  value(sandboxId: string, name: string): string | undefined {
    return this.bySandbox.get(sandboxId)?.get(name.toLowerCase());
  }

  forget(sandboxId: string): void {
    this.bySandbox.delete(sandboxId);
  }

  /** How many sandboxes have secrets here (for tests and logs: counts only). */
  get size(): number {
    return this.bySandbox.size;
  }
}

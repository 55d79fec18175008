import type { BodyCheck } from './call-policy.ts';
import { type CreatePolicySettings, containerCreateProblem } from './container-create-policy.ts';
import { JsonScanError, firstRepeatedKey } from './json-repeated-keys.ts';
import { execCreateProblem, networkCreateProblem } from './small-body-policy.ts';

/** A body the gate will not forward: 400 when it is not well-formed, 403 when it asks for what is not allowed. */
export class BodyRefused extends Error {
  constructor(
    readonly status: 400 | 403,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Checks the body of a call the gate reads (container, exec and network creates; a start takes none) and
 * returns the bytes to forward: the checked value serialised again, never the client's bytes, so the engine
 * decodes exactly what the gate judged. A key repeated within one object (in any case: Go matches field names
 * case-insensitively and merges repeated objects) is refused before anything else.
 */
export function checkedBody(check: BodyCheck, raw: Buffer, settings: CreatePolicySettings): Buffer {
  const text = raw.toString('utf8');
  if (check === 'empty') {
    const trimmed = text.trim();
    if (trimmed === '' || trimmed === '{}' || trimmed === 'null') return Buffer.alloc(0);
    throw new BodyRefused(403, 'this call takes no body (no HostConfig at start)');
  }
  let repeated: string | undefined;
  try {
    repeated = firstRepeatedKey(text);
  } catch (error) {
    if (error instanceof JsonScanError) throw new BodyRefused(400, `the body is not valid JSON (${error.message})`);
    throw error;
  }
  if (repeated !== undefined) {
    throw new BodyRefused(400, `the body repeats the key ${JSON.stringify(repeated)} (field names are compared case-insensitively, as the engine reads them)`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BodyRefused(400, 'the body is not valid JSON');
  }
  const problem = check === 'exec-create' ? execCreateProblem(body) : check === 'network-create' ? networkCreateProblem(body) : containerCreateProblem(body, settings);
  if (problem) throw new BodyRefused(403, problem);
  return Buffer.from(JSON.stringify(body), 'utf8');
}

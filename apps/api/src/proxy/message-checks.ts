import { validateHeaderName, validateHeaderValue } from 'node:http';

/**
 * Checks on HTTP heads crossing the proxy. Node's parser already refuses most malformed input, but what it lets
 * through must still be safe to re-serialise: these checks decide before anything is written, so a hostile sandbox
 * or client gets a clean refusal instead of an exception in the middle of a write.
 */

/** Characters Node's serialiser refuses in a reason phrase or header value. */
const INVALID_TEXT = /[^\t\x20-\x7e\x80-\xff]/;
const DIGITS = /^[0-9]+$/;

function headerProblem(name: string, value: string): string | undefined {
  try {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    return undefined;
  } catch {
    return `invalid header ${JSON.stringify(name.slice(0, 64))}`;
  }
}

function valuesOf(raw: readonly string[], lowerName: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === lowerName) out.push(raw[i + 1]!);
  return out;
}

/** Content-Length and Transfer-Encoding must describe one framing only. */
function framingProblem(raw: readonly string[]): string | undefined {
  const lengths = valuesOf(raw, 'content-length');
  const encodings = valuesOf(raw, 'transfer-encoding');
  if (lengths.length > 1) return 'duplicate content-length';
  if (lengths.length === 1 && !DIGITS.test(lengths[0]!.trim())) return 'invalid content-length';
  if (lengths.length > 0 && encodings.length > 0) return 'both content-length and transfer-encoding';
  return undefined;
}

/**
 * Why a sandbox's response head cannot be relayed, or undefined when it can. A final answer is 200–599; interim
 * 1xx answers are never relayed as final, except `101` when an upgrade was asked for (`switching`).
 */
export function upstreamHeadProblem(
  statusCode: number | undefined,
  statusMessage: string | undefined,
  raw: readonly string[],
  switching = false,
): string | undefined {
  const validStatus = switching ? statusCode === 101 : statusCode !== undefined && Number.isInteger(statusCode) && statusCode >= 200 && statusCode <= 599;
  if (!validStatus) return `invalid status ${statusCode}`;
  if (statusMessage !== undefined && INVALID_TEXT.test(statusMessage)) return 'invalid status line';
  if (raw.length % 2 !== 0) return 'truncated header list';
  for (let i = 0; i < raw.length; i += 2) {
    const problem = headerProblem(raw[i]!, raw[i + 1]!);
    if (problem) return problem;
  }
  return framingProblem(raw);
}

/** Methods whose requests carry no body by convention; a chunked body on them is refused rather than relayed. */
const BODYLESS_METHODS = new Set(['GET', 'HEAD']);

/** Why a client request must not reach a sandbox (ambiguous framing), or undefined when it may. */
export function requestFramingProblem(method: string | undefined, raw: readonly string[]): string | undefined {
  const framing = framingProblem(raw);
  if (framing) return framing;
  const encodings = valuesOf(raw, 'transfer-encoding');
  if (encodings.length === 0) return undefined;
  if (BODYLESS_METHODS.has(method ?? '')) return `transfer-encoding on ${method}`;
  const codings = encodings.join(',').split(',').map((c) => c.trim().toLowerCase()).filter(Boolean);
  if (codings[codings.length - 1] !== 'chunked') return 'transfer-encoding must end with chunked';
  return undefined;
}

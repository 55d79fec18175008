import { isIP } from 'node:net';
import { invalid } from '../errors.ts';
import { canonicalSecretName } from '../secrets/secret-rules.ts';

/**
 * `network.rules`: per destination domain, transforms the egress proxy applies to the sandbox's HTTP(S)
 * requests there (today: headers set or replaced, values may hold `${e2b.secrets.<name>}` placeholders that
 * are resolved per request, never stored in the sandbox).
 */
export interface NetworkRule {
  transform?: { headers?: Record<string, string> };
}
export type NetworkRules = Record<string, NetworkRule[]>;

export const TRANSFORM_LIMITS = {
  domains: 100,
  rulesPerDomain: 16,
  headersPerRule: 32,
  headerNameBytes: 128,
  /** A header value as written in the rule (placeholders unresolved) and after resolution. */
  headerValueBytes: 8 * 1024,
} as const;

const DOMAIN = /^(\*\.)?([a-z0-9_-]+\.)*[a-z0-9_-]+$/;
/** RFC 9110 token characters. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a header value may never hold: CR, LF, NUL and other control characters (tab is allowed). */
const BAD_VALUE_CHARACTER = /[\x00-\x08\x0a-\x1f\x7f]/;
const PLACEHOLDER = /\$\{e2b\.secrets\.([^}]*)\}/g;
/**
 * Headers that decide how a request is framed or routed: injecting them would let a rule desynchronise the
 * proxy from the destination (request smuggling) or send the request elsewhere.
 */
const FRAMING_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'proxy-connection', 'expect']);

const quoted = (text: string): string => JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);

/** True when `value` may be sent as an HTTP header value (after resolution too). */
export function headerValueProblem(value: string): string | undefined {
  if (BAD_VALUE_CHARACTER.test(value)) return 'holds a control character (CR, LF, NUL …)';
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > TRANSFORM_LIMITS.headerValueBytes) return `is ${bytes} bytes; at most ${TRANSFORM_LIMITS.headerValueBytes} are allowed`;
  return undefined;
}

function checkHeaders(domain: string, headers: unknown): Record<string, string> {
  if (headers === undefined || headers === null) return {};
  if (typeof headers !== 'object' || Array.isArray(headers)) throw invalid(`network.rules[${quoted(domain)}]: transform.headers must be an object of header names to string values`);
  const entries = Object.entries(headers as Record<string, unknown>);
  if (entries.length > TRANSFORM_LIMITS.headersPerRule) throw invalid(`network.rules[${quoted(domain)}]: a transform sets at most ${TRANSFORM_LIMITS.headersPerRule} headers (got ${entries.length})`);
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    if (name.includes('${')) throw invalid(`network.rules[${quoted(domain)}]: header name ${quoted(name)} holds a placeholder; placeholders are allowed in header values only`);
    if (name.length === 0 || name.length > TRANSFORM_LIMITS.headerNameBytes || !HEADER_NAME.test(name)) {
      throw invalid(`network.rules[${quoted(domain)}]: header name ${quoted(name)} is not valid: use 1-${TRANSFORM_LIMITS.headerNameBytes} token characters (letters, digits, '-' …)`);
    }
    if (FRAMING_HEADERS.has(name.toLowerCase())) throw invalid(`network.rules[${quoted(domain)}]: header ${quoted(name)} cannot be set by a transform (it frames or routes the request)`);
    if (typeof value !== 'string') throw invalid(`network.rules[${quoted(domain)}]: the value of header ${quoted(name)} must be a string`);
    const problem = headerValueProblem(value);
    if (problem) throw invalid(`network.rules[${quoted(domain)}]: the value of header ${quoted(name)} ${problem}`);
    for (const match of value.matchAll(PLACEHOLDER)) canonicalSecretName(match[1]!);
    out[name] = value;
  }
  return out;
}

/**
 * Validates and normalises `network.rules` (keys lower-cased, only `transform.headers` kept). Domains only:
 * a transform is applied where the egress proxy sees the name (HTTP Host, TLS SNI), so IP and CIDR keys are
 * refused, as is a bare `*`. Returns undefined for an absent or empty value.
 */
export function normaliseRules(rules: unknown): NetworkRules | undefined {
  if (rules === undefined || rules === null || (Array.isArray(rules) && rules.length === 0)) return undefined;
  if (typeof rules !== 'object' || Array.isArray(rules)) throw invalid('network.rules must be an object of domain names to lists of rules');
  const entries = Object.entries(rules as Record<string, unknown>);
  if (entries.length === 0) return undefined;
  if (entries.length > TRANSFORM_LIMITS.domains) throw invalid(`network.rules names at most ${TRANSFORM_LIMITS.domains} domains (got ${entries.length})`);
  const out: NetworkRules = {};
  for (const [key, list] of entries) {
    const domain = key.toLowerCase().replace(/\.$/, '');
    if (key.includes('/') || isIP(key) !== 0 || isIP(key.replace(/^\[|\]$/g, '')) !== 0) throw invalid(`network.rules[${quoted(key)}]: transforms apply to domain names only (the proxy matches HTTP Host / TLS SNI), not IP addresses or CIDRs`);
    if (domain === '*') throw invalid('network.rules: a bare "*" is not a valid domain; use a name or a "*.<domain>" wildcard');
    if (domain.length === 0 || domain.length > 253 || !DOMAIN.test(domain)) throw invalid(`network.rules: ${quoted(key)} is not a domain name or "*.<domain>" wildcard`);
    if (out[domain]) throw invalid(`network.rules names ${quoted(domain)} twice (keys are case-insensitive)`);
    if (!Array.isArray(list)) throw invalid(`network.rules[${quoted(key)}] must be a list of rules`);
    if (list.length > TRANSFORM_LIMITS.rulesPerDomain) throw invalid(`network.rules[${quoted(key)}] has ${list.length} rules; at most ${TRANSFORM_LIMITS.rulesPerDomain} are allowed`);
    out[domain] = list.map((rule): NetworkRule => {
      if (rule === null || typeof rule !== 'object' || Array.isArray(rule)) throw invalid(`network.rules[${quoted(key)}]: each rule must be an object like {"transform": {"headers": {...}}}`);
      const transform = (rule as { transform?: unknown }).transform;
      if (transform === undefined || transform === null) return {};
      if (typeof transform !== 'object' || Array.isArray(transform)) throw invalid(`network.rules[${quoted(key)}]: transform must be an object`);
      return { transform: { headers: checkHeaders(key, (transform as { headers?: unknown }).headers) } };
    });
  }
  return out;
}

/**
 * The rules that apply to `host`: the exact name's, else the longest matching `*.` wildcard's (a wildcard
 * matches names below it at any depth, not itself). Rule sets are not merged.
 */
export function rulesFor(rules: NetworkRules | undefined, host: string): NetworkRule[] | undefined {
  if (!rules) return undefined;
  const name = host.toLowerCase().replace(/\.$/, '');
  if (rules[name]) return rules[name];
  let best: string | undefined;
  for (const pattern of Object.keys(rules)) {
    if (pattern.startsWith('*.') && name.endsWith(pattern.slice(1)) && (!best || pattern.length > best.length)) best = pattern;
  }
  return best ? rules[best] : undefined;
}

/** The headers a matching rule set injects (later rules override earlier ones), placeholders unresolved. */
export function headerTemplates(rules: NetworkRule[]): Array<[string, string]> {
  const byName = new Map<string, [string, string]>();
  for (const rule of rules) for (const [name, value] of Object.entries(rule.transform?.headers ?? {})) byName.set(name.toLowerCase(), [name, value]);
  return [...byName.values()];
}

/** A header value with each placeholder replaced by the secret's current value (undefined: no such secret). */
export async function resolvePlaceholders(template: string, resolveSecret: (name: string) => Promise<string | undefined>): Promise<{ value: string } | { missing: string }> {
  let value = '';
  let at = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    const secret = await resolveSecret(match[1]!);
    if (secret === undefined) return { missing: match[1]! };
    value += template.slice(at, match.index) + secret;
    at = match.index! + match[0].length;
  }
  return { value: value + template.slice(at) };
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus `expect`, which the front server already answered. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
]);

function connectionTokens(raw: string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) {
      const name = token.trim().toLowerCase();
      if (name && name !== 'close' && name !== 'keep-alive') (tokens ??= new Set()).add(name);
    }
  }
  return tokens;
}

/** Drops hop-by-hop headers from a flat raw header list, keeping case, order and duplicates of the rest. */
export function stripHopByHop(raw: string[]): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named?.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

/**
 * Applies `maskRequestHost`: the upstream Host becomes the mask (`${PORT}` replaced) and the original Host moves
 * to `X-Forwarded-Host`. Without a mask the list is returned unchanged.
 */
export function applyHostMask(raw: string[], mask: string | undefined, port: number): string[] {
  if (!mask) return raw;
  const masked = mask.split('${PORT}').join(String(port));
  const out: string[] = [];
  let original: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'host') {
      original ??= raw[i + 1];
      continue;
    }
    if (lower === 'x-forwarded-host') continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  out.unshift('Host', masked);
  if (original !== undefined) out.push('X-Forwarded-Host', original);
  return out;
}

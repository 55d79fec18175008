import { isIP } from 'node:net';

/**
 * The address a request comes from, for per-client limits. The socket's peer, unless the operator says the
 * platform sits behind a reverse proxy (TIDEPOOL_TRUST_FORWARDED_FOR): then the last X-Forwarded-For entry,
 * the one that proxy appended (entries before it are whatever the client sent). An entry that is not an IP
 * address is ignored.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | string[] | undefined, trustForwardedFor: boolean): string {
  const peer = normalise(socketAddress ?? '');
  if (!trustForwardedFor || forwardedFor === undefined) return peer;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  const last = normalise(header.split(',').pop()?.trim() ?? '');
  return isIP(last) !== 0 ? last : peer;
}

function normalise(address: string): string {
  return address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
}

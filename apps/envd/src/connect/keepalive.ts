/** Reference agent default when the client sends no `Keepalive-Ping-Interval`. */
export const DEFAULT_KEEPALIVE_SECONDS = 90;

/** Keepalive period in ms from the `Keepalive-Ping-Interval` header (seconds). */
export function keepaliveIntervalMs(headers: Pick<Headers, 'get'>): number {
  const raw = headers.get('keepalive-ping-interval');
  const seconds = raw === null ? NaN : Number(raw.trim());
  const effective = Number.isFinite(seconds) && seconds > 0 ? seconds : DEFAULT_KEEPALIVE_SECONDS;
  return Math.round(effective * 1000);
}

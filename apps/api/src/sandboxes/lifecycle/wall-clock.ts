/** Now, as the ISO timestamp sandbox records store. */
export const nowIso = (): string => new Date().toISOString();
/** `seconds` from now, as an ISO timestamp (an end of life, a timeout). */
export const inSeconds = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString();

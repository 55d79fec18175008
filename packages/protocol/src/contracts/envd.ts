/**
 * What the platform and envd agree on outside the Connect services: envd's port and the body of `POST /init`.
 * Written once here for every side (the API, envd, the dashboard).
 */

/** envd's port inside every sandbox; the platform's proxy routes `E2b-Sandbox-Port` / `<port>-<id>` hosts on it. */
export const ENVD_PORT = 49983;

/** The body of envd's `POST /init` as it travels: every field optional, as the reference's envd accepts it. */
export interface EnvdInitBody {
  envVars?: Record<string, string>;
  accessToken?: string;
  /** RFC 3339; an `/init` older than the last one applied is ignored. */
  timestamp?: string;
  defaultUser?: string;
  /** Empty string = the user's home. */
  defaultWorkdir?: string;
}

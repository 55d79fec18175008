import { readFileSync } from 'node:fs';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { DEFAULT_ACCESS_TOKEN_FILE } from './birth-token.ts';

/** Version reported to clients; ≥ 0.6.4 opens every gate of the e2b SDK. */
export const ENVD_VERSION = '0.6.14';

export interface EnvdConfig {
  port: number;
  host: string;
  /** Level for pino; `silent` in tests. */
  logLevel: string;
  /** Forward services bound to localhost onto the container's external addresses. */
  forwardLocalPorts: boolean;
  /**
   * Local debugging without a platform (`-debug`): envd may start without an access token and the first
   * `/init` may set one. Containers the platform creates never pass it. Only a flag: a sandbox's environment
   * includes its image's ENV, which the image's author chooses, so it cannot switch envd's security off.
   */
  debug: boolean;
  /** Security switches found in the environment and ignored (logged at startup). */
  ignoredEnv: string[];
  /** File holding the access token from birth (`-access-token-file` / `ENVD_ACCESS_TOKEN_FILE`). */
  accessTokenFile: string;
  /** Pipe commands start from the exec-as-user spawn server (`ENVD_SPAWN_SERVER`, default true). */
  spawnServer: boolean;
  /** `process.Process/Start` is served by start-fast-path.ts (`ENVD_START_FAST_PATH`, default true). */
  startFastPath: boolean;
}

function fail(message: string): never {
  throw new Error(`envd configuration: ${message}`);
}

/** Reads and validates the whole configuration once, at startup. */
export function loadEnvdConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv.slice(2)): EnvdConfig {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('-')) fail(`unexpected argument '${arg}'`);
    const [name, inline] = arg.replace(/^-+/, '').split('=', 2);
    if (inline !== undefined) flags.set(name, inline);
    else if (argv[i + 1] !== undefined && !argv[i + 1].startsWith('-')) flags.set(name, argv[++i]);
    else flags.set(name, 'true');
  }
  const rawPort = flags.get('port') ?? env.ENVD_PORT ?? String(ENVD_PORT);
  const port = Number(rawPort);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`port '${rawPort}' is not a TCP port (0-65535); set ENVD_PORT or -port`);
  const logLevel = flags.get('log-level') ?? env.ENVD_LOG_LEVEL ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) fail(`log level '${logLevel}' is not one of fatal,error,warn,info,debug,trace,silent`);
  const forward = flags.get('forward-local-ports') ?? env.ENVD_FORWARD_LOCAL_PORTS ?? 'true';
  if (!['true', 'false'].includes(forward)) fail(`ENVD_FORWARD_LOCAL_PORTS must be true or false, got '${forward}'`);
  const debug = flags.get('debug') ?? 'false';
  if (!['true', 'false'].includes(debug)) fail(`-debug must be true or false, got '${debug}'`);
  const spawnServer = env.ENVD_SPAWN_SERVER ?? 'true';
  if (!['true', 'false'].includes(spawnServer)) fail(`ENVD_SPAWN_SERVER must be true or false, got '${spawnServer}'`);
  const startFastPath = env.ENVD_START_FAST_PATH ?? 'true';
  if (!['true', 'false'].includes(startFastPath)) fail(`ENVD_START_FAST_PATH must be true or false, got '${startFastPath}'`);
  return {
    port,
    host: flags.get('host') ?? env.ENVD_HOST ?? '0.0.0.0',
    logLevel,
    forwardLocalPorts: forward === 'true',
    debug: debug === 'true',
    ignoredEnv: env.ENVD_DEBUG !== undefined ? ['ENVD_DEBUG'] : [],
    accessTokenFile: flags.get('access-token-file') ?? env.ENVD_ACCESS_TOKEN_FILE ?? DEFAULT_ACCESS_TOKEN_FILE,
    spawnServer: spawnServer === 'true',
    startFastPath: startFastPath === 'true',
  };
}

/** True when the version flag was asked for (`envd -version`). */
export function wantsVersion(argv: string[]): boolean {
  return argv.some((a) => a === '-version' || a === '--version');
}

export function readOptionalFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

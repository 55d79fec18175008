import { dirname, join } from 'node:path';
import { CODE_INTERPRETER_PORT } from '@tidepool/protocol/code-interpreter';

/** Settings of the code-interpreter server, read once at start from CODE_INTERPRETER_* variables. */
export interface ServerConfig {
  host: string;
  port: number;
  /** envd inside the same sandbox (global environment variables). */
  envdUrl: string;
  defaultCwd: string;
  python: string;
  bash: string;
  /** Directory holding kernel_bridge.py, kernel_setup.py and js-worker.mjs (next to the bundle). */
  assetsDir: string;
  /** Languages whose default context starts with the server. */
  prestart: string[];
  /** Languages (with slow starts) that keep one started kernel ahead for new contexts and restarts. */
  spares: string[];
  maxOutputBytes: number;
  maxResultBytes: number;
  maxBodyBytes: number;
  keepaliveMs: number;
  interruptGraceMs: number;
  kernelStartTimeoutMs: number;
  logLevel: string;
}

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new ConfigError(`${name}=${raw} is not an integer between ${min} and ${max}`);
  return value;
}

const list = (raw: string): string[] => raw.split(',').map((s) => s.trim()).filter(Boolean);

export function loadConfig(env: NodeJS.ProcessEnv, bundleFile: string): ServerConfig {
  const logLevel = env.CODE_INTERPRETER_LOG_LEVEL ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`CODE_INTERPRETER_LOG_LEVEL=${logLevel} is not one of fatal, error, warn, info, debug, trace, silent`);
  }
  return {
    host: env.CODE_INTERPRETER_HOST ?? '0.0.0.0',
    port: integer(env, 'CODE_INTERPRETER_PORT', CODE_INTERPRETER_PORT, 1, 65535),
    envdUrl: env.CODE_INTERPRETER_ENVD_URL ?? 'http://127.0.0.1:49983',
    defaultCwd: env.CODE_INTERPRETER_CWD ?? '/home/user',
    python: env.CODE_INTERPRETER_PYTHON ?? 'python3',
    bash: env.CODE_INTERPRETER_BASH ?? 'bash',
    assetsDir: env.CODE_INTERPRETER_ASSETS ?? dirname(bundleFile),
    prestart: list(env.CODE_INTERPRETER_PRESTART ?? 'python,javascript'),
    spares: list(env.CODE_INTERPRETER_SPARES ?? 'python'),
    maxOutputBytes: integer(env, 'CODE_INTERPRETER_MAX_OUTPUT_BYTES', 8 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxResultBytes: integer(env, 'CODE_INTERPRETER_MAX_RESULT_BYTES', 64 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxBodyBytes: integer(env, 'CODE_INTERPRETER_MAX_BODY_BYTES', 16 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    keepaliveMs: integer(env, 'CODE_INTERPRETER_KEEPALIVE_MS', 2000, 100, 5000),
    interruptGraceMs: integer(env, 'CODE_INTERPRETER_INTERRUPT_GRACE_MS', 3000, 100, 600_000),
    kernelStartTimeoutMs: integer(env, 'CODE_INTERPRETER_KERNEL_START_TIMEOUT_MS', 60_000, 1000, 600_000),
    logLevel,
  };
}

export const assetPath = (config: ServerConfig, name: string): string => join(config.assetsDir, name);

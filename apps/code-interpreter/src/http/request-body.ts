import type { IncomingMessage } from 'node:http';
import { badRequest, HttpError } from './http-error.ts';

/** Reads a JSON object body of at most `maxBytes`; 400 for anything else, 413 when too large. */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw badRequest(`request body is not valid JSON: ${(error as Error).message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  return body as Record<string, unknown>;
}

/** An optional string field (absent and null both mean absent). */
export function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badRequest(`'${field}' must be a string`);
  return value;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `env_vars`: an object of variable name → string value. */
export function optionalEnvVars(body: Record<string, unknown>, field: string): Record<string, string> {
  const value = body[field];
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`'${field}' must be an object of variable names to string values`);
  const envs: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (!ENV_NAME.test(key)) throw badRequest(`'${field}': '${key.slice(0, 100)}' is not a valid environment variable name (letters, digits and _, not starting with a digit)`);
    if (typeof v !== 'string') throw badRequest(`'${field}.${key}' must be a string`);
    if (v.includes('\0')) throw badRequest(`'${field}.${key}' contains a NUL character`);
    envs[key] = v;
  }
  return envs;
}

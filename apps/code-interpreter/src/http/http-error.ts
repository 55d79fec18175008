import type { ServerResponse } from 'node:http';
import { InterpreterError } from '../kernels/kernel.ts';

/** A request the server refuses or cannot serve: the one error type of the HTTP layer, sent as `{code, message}`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (message: string): HttpError => new HttpError(400, message);
export const notFound = (message: string): HttpError => new HttpError(404, message);

/** Every failure of a route, classified once. */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof InterpreterError) return new HttpError(500, error.message);
  return new HttpError(500, `internal error: ${(error as Error)?.message ?? String(error)}`);
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, error.status, { code: error.status, message: error.message });
}

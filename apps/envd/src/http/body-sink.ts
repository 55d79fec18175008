import type { Readable, Writable } from 'node:stream';

/**
 * Pipes a request body into `target` with backpressure and resolves once `target` has finished and
 * closed. Unlike `stream.pipeline`, a failing target (a full disk, a malformed multipart body) does
 * not destroy the source: the request socket stays usable, so the error response still reaches the
 * client and the rest of the body is drained by the HTTP server.
 */
export function pumpInto(source: Readable, target: Writable): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const fail = (error: Error): void => {
      if (settled) return;
      settled = true;
      source.unpipe(target);
      source.off('close', aborted);
      target.destroy();
      source.resume();
      reject(error);
    };
    const aborted = (): void => {
      if (!source.readableEnded) fail(Object.assign(new Error('the request body ended early (client went away)'), { code: 'ECONNRESET' }));
    };
    if (source.errored) {
      target.destroy();
      reject(source.errored);
      return;
    }
    // Error listeners stay attached: a stream may emit a second error after the first settled us.
    source.on('error', fail);
    source.once('close', aborted);
    target.on('error', fail);
    target.once('close', () => {
      if (settled) return;
      if (!target.writableFinished) {
        fail(Object.assign(new Error('upload stream closed before the body was written'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
        return;
      }
      settled = true;
      source.off('close', aborted);
      resolve();
    });
    source.pipe(target);
  });
}

/** Reading the streams the Docker Engine answers with: JSON progress lines and multiplexed logs. */
import type { Readable } from 'node:stream';

export interface ProgressMessage {
  status?: string;
  id?: string;
  progress?: string;
  error?: string;
  errorDetail?: { message?: string };
  stream?: string;
}

/**
 * Reads a JSON-lines progress stream (pull, import) to its end. Every message goes to `onMessage`;
 * a message with `error` rejects with the engine's text.
 */
export function readProgress(stream: Readable, onMessage: (message: ProgressMessage) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    let failed: string | undefined;
    const handle = (line: string): void => {
      if (!line.trim()) return;
      let message: ProgressMessage;
      try {
        message = JSON.parse(line) as ProgressMessage;
      } catch {
        return;
      }
      if (message.error || message.errorDetail?.message) failed ??= message.errorDetail?.message ?? message.error;
      else onMessage(message);
    };
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        handle(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
      }
    });
    stream.on('error', reject);
    stream.on('end', () => {
      handle(buffered);
      if (failed !== undefined) reject(new Error(failed));
      else resolve();
    });
  });
}

/** Progress updates too frequent to log one by one. */
const NOISY_STATUS = /^(Downloading|Extracting|Waiting|Verifying Checksum|Pulling fs layer|Download complete)$/;

/** A pull message as one readable log line, or undefined for per-chunk progress noise. */
export function pullProgressLine(message: ProgressMessage): string | undefined {
  if (!message.status || NOISY_STATUS.test(message.status)) return undefined;
  return message.id ? `${message.id}: ${message.status}` : message.status;
}

/**
 * Splits the body of `GET /containers/{id}/logs` of a container without a TTY: frames of an 8-byte
 * header (stream type, 3 zero bytes, big-endian length) followed by the payload.
 */
export function demuxLogs(buffer: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const type = buffer[offset];
    const length = buffer.readUInt32BE(offset + 4);
    if (type > 2 || buffer[offset + 1] !== 0) return buffer.toString('utf8'); // not multiplexed after all
    parts.push(buffer.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  return Buffer.concat(parts).toString('utf8');
}

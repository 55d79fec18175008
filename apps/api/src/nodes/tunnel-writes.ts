/**
 * Node 20's HTTP/2 streams corrupt batched string writes: when a writer corks a stream and writes a string and
 * then more (http.ClientRequest does exactly this: its header block as a latin1 string, then the body), the
 * stream's `_writev` hands the native layer string chunks whose bytes are garbage by the time they are sent — the
 * far end then sees `\xe8\xa5\t…1.1\r\n…` instead of `POST /init HTTP/1.1`. A tunnel stream is given a `_writev`
 * that turns every string chunk into a Buffer first; the bytes then arrive as written.
 */
import type { Duplex } from 'node:stream';

type Chunk = { chunk: unknown; encoding: BufferEncoding | 'buffer' };
type Writev = (chunks: Chunk[], callback: (error?: Error | null) => void) => void;

export function buffersOnlyWritev<T extends Duplex>(stream: T): T {
  const target = stream as unknown as { _writev?: Writev | null };
  const original = target._writev;
  if (typeof original !== 'function') return stream;
  target._writev = (chunks, callback) =>
    original.call(
      stream,
      chunks.map(({ chunk, encoding }) => (typeof chunk === 'string' ? { chunk: Buffer.from(chunk, encoding === 'buffer' ? 'utf8' : encoding), encoding: 'buffer' as const } : { chunk, encoding })),
      callback,
    );
  return stream;
}

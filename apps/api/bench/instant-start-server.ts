/**
 * The SDK's floor for the exec benchmark: an HTTP server (its own process, so its CPU does not land on the
 * client's event loop) that answers `process.Process/Start` at once, in Connect's JSON stream framing, with a
 * start event and, one turn later, the end event and end-of-stream, as envd does for `true`. Nothing is spawned.
 * Listens on 127.0.0.1 and a free port, or on argv[2] and argv[3] (host, port) when given. Prints
 * `listening <port>` on stdout.
 */
import { createServer } from 'node:http';

function message(flags: number, payload: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(payload));
  const frame = Buffer.alloc(5 + json.length);
  frame[0] = flags;
  frame.writeUInt32BE(json.length, 1);
  json.copy(frame, 5);
  return frame;
}

const started = message(0, { event: { start: { pid: 4242 } } });
const ended = Buffer.concat([message(0, { event: { end: { exitCode: 0, exited: true, status: 'exit status 0' } } }), message(2, {})]);

const server = createServer((req, res) => {
  req.resume();
  req.once('end', () => {
    if (req.url !== '/process.Process/Start') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.write(started);
    setImmediate(() => res.end(ended));
  });
});
const [host = '127.0.0.1', port = '0'] = process.argv.slice(2);
server.listen(Number(port), host, () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});

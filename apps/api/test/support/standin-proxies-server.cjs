// Stand-ins for a user's own egress proxies, run inside the test's network namespace by standin-proxies.ts.
// 198.18.60.2:3128 HTTP CONNECT, 198.18.60.3:1080 SOCKS5 (RFC 1928 + 1929), 198.18.60.4:1080 a proxy that
// accepts and never answers; 198.18.60.10 the destination behind them (HTTP on 8080 and 80, a server-first
// banner on 2222). Both proxies require USER/PASS (argv) and print one JSON line per request they were asked.
const net = require('node:net');
const http = require('node:http');

const [USER, PASS] = process.argv.slice(2);
const DEST = '198.18.60.10';
const NAMES = { 'dest.standin.test': DEST };
const record = (entry) => process.stdout.write(`${JSON.stringify(entry)}\n`);

function dial(host, port, from, onOpen, onFail) {
  const upstream = net.connect({ host: NAMES[host] ?? host, port, localAddress: from });
  upstream.once('connect', () => onOpen(upstream));
  upstream.once('error', onFail);
}

function splice(client, upstream, rest) {
  if (rest.length > 0) upstream.write(rest);
  client.pipe(upstream);
  upstream.pipe(client);
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
}

const answer = (req, res) => res.end(`dest from=${req.socket.remoteAddress} host=${req.headers.host}\n`);
http.createServer(answer).listen(8080, DEST);
http.createServer(answer).listen(80, DEST);
// A peer that resets the connection must not end this server (an unhandled socket error would).
net.createServer((socket) => socket.on('error', () => socket.destroy()).end(`SSH-2.0-standin from=${socket.remoteAddress}\r\n`)).listen(2222, DEST);

net
  .createServer((client) => {
    client.on('error', () => undefined);
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const [line, ...headers] = head.subarray(0, end).toString('latin1').split('\r\n');
      const target = line.split(' ')[1];
      const auth = headers.find((h) => /^proxy-authorization:/i.test(h));
      const credentials = auth ? Buffer.from(auth.split(' ').pop(), 'base64').toString() : null;
      const ok = credentials === `${USER}:${PASS}`;
      record({ proxy: 'http', method: line.split(' ')[0], target, credentials, ok });
      if (!ok) {
        client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="standin"\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const colon = target.lastIndexOf(':');
      dial(
        target.slice(0, colon).replace(/^\[|\]$/g, ''),
        Number(target.slice(colon + 1)),
        '198.18.60.2',
        (upstream) => {
          client.write('HTTP/1.1 200 Connection established\r\n\r\n');
          splice(client, upstream, head.subarray(end + 4));
        },
        () => client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n'),
      );
    };
    client.on('data', onData);
  })
  .listen(3128, '198.18.60.2');

net
  .createServer((client) => {
    client.on('error', () => undefined);
    let data = Buffer.alloc(0);
    let stage = 'greeting';
    let credentials = null;
    const onData = (chunk) => {
      data = Buffer.concat([data, chunk]);
      for (;;) {
        if (stage === 'greeting') {
          if (data.length < 2 || data.length < 2 + data[1]) return;
          const methods = [...data.subarray(2, 2 + data[1])];
          data = data.subarray(2 + data[1]);
          if (!methods.includes(2)) {
            record({ proxy: 'socks5', ok: false, methods });
            client.end(Buffer.from([5, 0xff]));
            return;
          }
          client.write(Buffer.from([5, 2]));
          stage = 'auth';
        } else if (stage === 'auth') {
          if (data.length < 2) return;
          const userLength = data[1];
          if (data.length < 3 + userLength) return;
          const passLength = data[2 + userLength];
          if (data.length < 3 + userLength + passLength) return;
          const user = data.subarray(2, 2 + userLength).toString();
          const pass = data.subarray(3 + userLength, 3 + userLength + passLength).toString();
          data = data.subarray(3 + userLength + passLength);
          credentials = `${user}:${pass}`;
          if (user !== USER || pass !== PASS) {
            record({ proxy: 'socks5', credentials, ok: false });
            client.end(Buffer.from([1, 1]));
            return;
          }
          client.write(Buffer.from([1, 0]));
          stage = 'request';
        } else {
          if (data.length < 5) return;
          const atyp = data[3];
          let host;
          let length;
          if (atyp === 1) {
            length = 10;
            if (data.length < length) return;
            host = [...data.subarray(4, 8)].join('.');
          } else if (atyp === 3) {
            length = 5 + data[4] + 2;
            if (data.length < length) return;
            host = data.subarray(5, 5 + data[4]).toString();
          } else {
            client.end(Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]));
            return;
          }
          const port = data.readUInt16BE(length - 2);
          client.off('data', onData);
          record({ proxy: 'socks5', target: `${host}:${port}`, atyp, credentials, ok: true });
          dial(
            host,
            port,
            '198.18.60.3',
            (upstream) => {
              client.write(Buffer.from([5, 0, 0, 1, 198, 18, 60, 3, 0, 0]));
              splice(client, upstream, data.subarray(length));
            },
            () => client.end(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0])),
          );
          return;
        }
      }
    };
    client.on('data', onData);
  })
  .listen(1080, '198.18.60.3');

net
  .createServer((client) => {
    client.on('error', () => undefined);
    record({ proxy: 'silent' });
  })
  .listen(1080, '198.18.60.4');

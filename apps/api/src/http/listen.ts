import type { AddressInfo, Server } from 'node:net';

/** Starts `server` listening; resolves with the bound address, rejects with the listen error (EADDRINUSE, EACCES). */
export function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** `scheme://address:port` of a bound listener (IPv6 addresses bracketed). */
export function listenerOrigin(scheme: 'http' | 'https', bound: AddressInfo): string {
  return `${scheme}://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`;
}

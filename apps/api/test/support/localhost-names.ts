import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/**
 * getaddrinfo must resolve `*.tidepool.localhost` for clients that reach the platform's TLS listener by name (the
 * SDK, the CLI, curl); Debian needs libnss-myhostname for that, installed here when missing (as scripts/bootstrap.sh
 * does), together with openssl and curl.
 */
export async function ensureLocalhostNames(): Promise<void> {
  const resolves = () => exec('getent', ['hosts', 'probe-1.tidepool.localhost']).then(() => true, () => false);
  const missing: string[] = [];
  if (!(await resolves())) missing.push('libnss-myhostname');
  for (const [tool, pkg] of [['openssl', 'openssl'], ['curl', 'curl']] as const) {
    if (!(await exec('sh', ['-c', `command -v ${tool}`]).then(() => true, () => false))) missing.push(pkg);
  }
  if (missing.length > 0) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    await exec('apt-get', ['update', '-q'], { env, timeout: 300_000 });
    await exec('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...missing], { env, timeout: 300_000 });
  }
  if (!(await resolves())) {
    throw new Error('*.tidepool.localhost does not resolve: add "myhostname" to the hosts line of /etc/nsswitch.conf (libnss-myhostname)');
  }
}

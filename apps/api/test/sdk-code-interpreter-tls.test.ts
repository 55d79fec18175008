/**
 * `@e2b/code-interpreter` over the platform's own TLS by host name, as a user runs it: only E2B_DOMAIN, the key and
 * the local CA; the SDK reaches the code-interpreter server at `https://49999-<id>.tidepool.localhost:<port>`
 * (no routing headers, no E2B_SANDBOX_URL). With allowPublicTraffic=false the SDK's traffic token gets it in and
 * a request without the token is refused. How the local TLS works: sdk-hosts-tls.test.ts.
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLocalhostNames } from './support/localhost-names.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..', '..');
const DRIVER = join(here, 'support', 'code-interpreter-tls-driver.ts');

let platform: TestPlatform;

async function scenario(args: Record<string, unknown>): Promise<Record<string, any>> {
  const env: NodeJS.ProcessEnv = { ...process.env, E2B_DOMAIN: platform.clientDomain!, E2B_API_KEY: platform.apiKey, NODE_EXTRA_CA_CERTS: platform.caFile! };
  for (const name of ['E2B_SANDBOX_URL', 'E2B_DEBUG', 'E2B_API_URL']) delete env[name];
  const { stdout } = await exec(process.execPath, ['--no-warnings', '--import', 'tsx', DRIVER, JSON.stringify(args)], { cwd: repoRoot, env, timeout: 240_000 }).catch(
    (error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`code-interpreter TLS scenario failed: ${error.stdout ?? ''}${error.stderr ?? ''}${error.message}`);
    },
  );
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, any>;
}

beforeAll(async () => {
  await ensureLocalhostNames();
  platform = await startTestPlatform({ sandboxNetwork: 'tidepool-sdk-ci-tls-test', tls: true, httpsPort: 0 });
}, 600_000);

afterAll(async () => {
  await platform?.dispose();
});

describe('@e2b/code-interpreter over https://49999-<id>.<domain>', () => {
  it('runs Python and JavaScript, streaming, by host name over the platform TLS', async () => {
    const seen = await scenario({});
    expect(seen.host).toMatch(new RegExp(`^49999-${seen.sandboxId}\\.tidepool\\.localhost:\\d+$`));
    expect(seen.python).toBe('42');
    expect(seen.stdout).toEqual(['streamed\n']);
    expect(seen.js).toBe('2,4,6');
    expect(seen.unauthenticated).toBe(200);
  });

  it('allowPublicTraffic=false: the SDK sends its traffic token; without it the server is not reachable', async () => {
    const seen = await scenario({ allowPublicTraffic: false });
    expect(seen.trafficToken).toBe(true);
    expect(seen.python).toBe('42');
    expect(seen.js).toBe('2,4,6');
    expect(seen.unauthenticated).toBe(403);
  });
});

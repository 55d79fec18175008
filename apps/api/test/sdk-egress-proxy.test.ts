/**
 * `network.egressProxy` end to end: real sandboxes made with the published e2b SDK send all their TCP through the
 * user's own proxy (stand-in SOCKS5 and HTTP CONNECT servers in a network namespace the test creates, 198.18.60.0/24,
 * with the destination behind them). No other address is contacted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox, SandboxError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tcpProbe } from './support/sandbox-probes.ts';
import { PROXY_ADDRESSES, type ProxyRecord, startStandinProxies, type StandinProxies } from './support/standin-proxies.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const USER = 'alice';
const PASSWORD = 'pr0xy-Pa55-7f3c91';
const DEST = PROXY_ADDRESSES.destination;
const socks = (password = PASSWORD) => ({ address: `${PROXY_ADDRESSES.socks5}:1080`, username: USER, password });
const connect = (password = PASSWORD) => ({ address: `http://${PROXY_ADDRESSES.http}:3128`, username: USER, password });

let platform: TestPlatform;
let proxies: StandinProxies;

const create = (network: Record<string, unknown>): Promise<Sandbox> => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, network });

/** curl from inside the sandbox; `seconds` bounds it. */
async function curl(sbx: Sandbox, url: string, extra = '', seconds = 8): Promise<{ ok: boolean; body: string; ms: number }> {
  const script = `s=$(date +%s%N); out=$(curl -sS --max-time ${seconds} ${extra} '${url}' 2>&1); rc=$?; echo "$rc $(( ($(date +%s%N) - s) / 1000000 )) $out"`;
  const result = await sbx.commands.run(script, { timeoutMs: (seconds + 20) * 1000 });
  const [rc, ms, ...rest] = result.stdout.trim().split(' ');
  return { ok: rc === '0', body: rest.join(' '), ms: Number(ms) };
}

/** Records the proxies made from now on, after `action`. */
async function recorded(action: () => Promise<void>): Promise<ProxyRecord[]> {
  const from = proxies.records.length;
  await action();
  return proxies.records.slice(from);
}

async function events(id: string): Promise<string[]> {
  const answer = await api(platform, 'GET', `/v2/sandboxes/${id}/logs?direction=forward`);
  return (answer.body.logs as Array<{ message: string }>).map((e) => e.message);
}

/** The sandbox's events once one matches (stored asynchronously, just after the connection closed), within 5 s. */
async function eventMatching(id: string, match: (message: string) => boolean): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const logged = await events(id);
    if (logged.some(match) || Date.now() > deadline) return logged;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  platform = await startTestPlatform({ sandboxNetwork: 'tidepool-upstream-test', ...(process.env.EGRESS_TEST_LOG ? { logLevel: 'info' } : {}) } as never);
  proxies = await startStandinProxies(USER, PASSWORD);
}, 600_000);

afterAll(async () => {
  await proxies?.stop();
  await platform?.dispose();
});

describe('egress through the sandbox owner\'s proxy', () => {
  it('SOCKS5 with credentials: HTTP by address, HTTP by name (remote DNS) and a non-HTTP port all leave through it', async () => {
    const sbx = await create({ egressProxy: socks() });
    let answer!: Awaited<ReturnType<typeof curl>>;
    const asked = await recorded(async () => {
      answer = await curl(sbx, `http://${DEST}:8080/`);
    });
    expect(answer).toMatchObject({ ok: true, body: `dest from=${PROXY_ADDRESSES.socks5} host=${DEST}:8080` });
    expect(asked).toEqual([{ proxy: 'socks5', target: `${DEST}:8080`, atyp: 1, credentials: `${USER}:${PASSWORD}`, ok: true }]);

    const byName = await recorded(async () => {
      answer = await curl(sbx, `http://${DEST}/`, "-H 'Host: dest.standin.test'");
    });
    expect(answer.body).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=dest.standin.test`);
    expect(byName).toEqual([{ proxy: 'socks5', target: 'dest.standin.test:80', atyp: 3, credentials: `${USER}:${PASSWORD}`, ok: true }]);

    const banner = await tcpProbe(sbx, DEST, 2222);
    expect(banner.output).toBe(`SSH-2.0-standin from=${PROXY_ADDRESSES.socks5}`);
    await sbx.kill();
  });

  it('HTTP CONNECT with Basic credentials', async () => {
    const sbx = await create({ egressProxy: connect() });
    let answer!: Awaited<ReturnType<typeof curl>>;
    const asked = await recorded(async () => {
      answer = await curl(sbx, `http://${DEST}:8080/`);
    });
    expect(answer).toMatchObject({ ok: true, body: `dest from=${PROXY_ADDRESSES.http} host=${DEST}:8080` });
    expect(asked).toEqual([{ proxy: 'http', method: 'CONNECT', target: `${DEST}:8080`, credentials: `${USER}:${PASSWORD}`, ok: true }]);
    await sbx.kill();
  });

  it('wrong credentials: the connection fails inside the sandbox, never goes direct, and the sandbox logs say why', async () => {
    const [viaSocks, viaConnect] = await Promise.all([create({ egressProxy: socks('wrong') }), create({ egressProxy: connect('wrong') })]);
    for (const [sbx, proxy] of [[viaSocks, 'socks5'], [viaConnect, 'http']] as const) {
      let answer!: Awaited<ReturnType<typeof curl>>;
      const asked = await recorded(async () => {
        answer = await curl(sbx, `http://${DEST}:8080/`);
      });
      expect(answer.ok).toBe(false);
      expect(answer.body).not.toContain('dest from=');
      expect(asked).toEqual([expect.objectContaining({ proxy, credentials: `${USER}:wrong`, ok: false })]);
      const matches = (m: string): boolean => m.includes(`${DEST}:8080`) && /refused|407/.test(m);
      const logged = await eventMatching(sbx.sandboxId, matches);
      expect(logged.some(matches), logged.join('\n')).toBe(true);
      expect(logged.join('\n')).not.toContain('wrong');
    }
    await Promise.all([viaSocks.kill(), viaConnect.kill()]);
  });

  it('getInfo and the stored data never hold the password; updateNetwork replaces and clears the proxy live', async () => {
    const sbx = await create({ egressProxy: socks() });
    const info = await sbx.getInfo();
    expect(info.network?.egressProxy).toEqual({ address: `${PROXY_ADDRESSES.socks5}:1080`, username: USER });
    expect(platform.lifecycle.get(sbx.sandboxId)!.network.egressProxy?.sealedPassword).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const raw = await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`);
    expect(JSON.stringify(raw.body)).not.toContain(PASSWORD);
    for (const file of readdirSync(platform.dataDir)) {
      if (file.endsWith('.key')) continue;
      const path = join(platform.dataDir, file);
      try {
        expect(readFileSync(path).includes(PASSWORD), file).toBe(false);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EISDIR') throw error;
      }
    }

    await sbx.updateNetwork({ egressProxy: connect() });
    expect((await curl(sbx, `http://${DEST}:8080/`)).body).toBe(`dest from=${PROXY_ADDRESSES.http} host=${DEST}:8080`);
    expect((await sbx.getInfo()).network?.egressProxy).toEqual({ address: `http://${PROXY_ADDRESSES.http}:3128`, username: USER });

    // An update without egressProxy stops tunnelling: the destination sees the host's own address (direct).
    const asked = await recorded(async () => {
      await sbx.updateNetwork({});
      expect((await curl(sbx, `http://${DEST}:8080/`)).body).toBe(`dest from=${PROXY_ADDRESSES.hostLink} host=${DEST}:8080`);
    });
    expect(asked).toEqual([]);
    expect((await sbx.getInfo()).network?.egressProxy).toBeUndefined();
    await sbx.kill();
  });

  it('the sandbox rules apply first: a denied destination never reaches the proxy; an allowed domain goes by name', async () => {
    const denied = await create({ egressProxy: socks(), denyOut: [`${DEST}/32`] });
    const asked = await recorded(async () => {
      expect((await curl(denied, `http://${DEST}:8080/`)).ok).toBe(false);
    });
    expect(asked).toEqual([]);
    const onlyDomain = await create({ egressProxy: socks(), allowOut: ['dest.standin.test'], denyOut: ['0.0.0.0/0'] });
    const byName = await recorded(async () => {
      expect((await curl(onlyDomain, `http://${DEST}/`, "-H 'Host: dest.standin.test'")).body).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=dest.standin.test`);
      expect((await curl(onlyDomain, `http://${DEST}/`, "-H 'Host: other.standin.test'")).ok).toBe(false);
      expect((await curl(onlyDomain, `http://${DEST}:8080/`)).ok).toBe(false);
    });
    expect(byName.map((r) => r.target)).toEqual(['dest.standin.test:80']);
    await Promise.all([denied.kill(), onlyDomain.kill()]);
  });

  it('a proxy that accepts and never answers: the sandbox connection is closed within the deadline, the platform stays up', async () => {
    const sbx = await create({ egressProxy: { address: `${PROXY_ADDRESSES.silent}:1080`, username: USER, password: PASSWORD } });
    const answer = await curl(sbx, `http://${DEST}:8080/`, '', 30);
    expect(answer.ok).toBe(false);
    expect(answer.ms).toBeGreaterThan(9_000);
    expect(answer.ms).toBeLessThan(15_000);
    const matches = (m: string): boolean => m.includes('did not complete the handshake');
    const logged = await eventMatching(sbx.sandboxId, matches);
    expect(logged.some(matches), logged.join('\n')).toBe(true);
    expect((await api(platform, 'GET', '/health')).status).toBe(200);
    await sbx.kill();
  });

  it('keeps tunnelling across a pause to disk (new address), a fork, and an API restart (the sealed password reopened)', async () => {
    let sbx = await create({ egressProxy: socks() });
    const through = async (s: Sandbox): Promise<string> => (await curl(s, `http://${DEST}:8080/`)).body;
    expect(await through(sbx)).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=${DEST}:8080`);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await through(sbx)).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=${DEST}:8080`);
    const [fork] = await sbx.fork({ timeoutMs: 120_000 });
    if (!(fork instanceof Sandbox)) throw fork;
    expect(await through(fork)).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=${DEST}:8080`);
    await fork.kill();

    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ sandboxNetwork: 'tidepool-upstream-test', apiKeys: [apiKey] }, dataDir);
    sbx = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, apiKey });
    const asked = await recorded(async () => {
      expect(await through(sbx)).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=${DEST}:8080`);
    });
    expect(asked).toEqual([expect.objectContaining({ proxy: 'socks5', credentials: `${USER}:${PASSWORD}`, ok: true })]);
    await sbx.kill();
  });

  it('refuses (400, nothing made) proxies in private ranges or on no proxy port, unknown schemes and credentials with CR/LF', async () => {
    const count = async (): Promise<number> => (await Sandbox.list({ ...platform.sdk }).nextItems()).length;
    const before = await count();
    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ address: '127.0.0.1:1080' }, /private, loopback or link-local/],
      [{ address: '169.254.169.254:80' }, /private, loopback or link-local/],
      [{ address: `${PROXY_ADDRESSES.socks5}:22` }, /port 22 is not an egress proxy port/],
      [{ address: `http://${PROXY_ADDRESSES.http}:5432` }, /port 5432 is not an egress proxy port/],
      [{ address: 'https://198.18.60.2:3128' }, /scheme https/],
      [{ address: `${PROXY_ADDRESSES.http}:3128`, username: 'u\r\nX-Injected: 1', password: 'p' }, /control characters/],
      [{ address: `${PROXY_ADDRESSES.http}:3128`, password: 'p' }, /only valid together with username/],
    ];
    for (const [egressProxy, message] of refusals) {
      const error = await Sandbox.create('base', { ...platform.sdk, network: { egressProxy } as never }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SandboxError);
      expect((error as Error).message).toMatch(/^400: /);
      expect((error as Error).message).toMatch(message);
    }
    expect(await count()).toBe(before);
    const sbx = await create({});
    const error = await sbx.updateNetwork({ egressProxy: { address: '10.1.2.3:1080' } }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/private, loopback or link-local/);
    expect((await curl(sbx, `http://${DEST}:8080/`)).body).toBe(`dest from=${PROXY_ADDRESSES.hostLink} host=${DEST}:8080`);
    await sbx.kill();
  });
});

/**
 * Egress rules (allowOut / denyOut / allow_internet_access / PUT /network) enforced on real sandboxes through
 * the platform and the e2b SDK. "The internet" is a network namespace the test creates, with addresses in
 * 198.18.0.0/15 (see support/standin-hosts.ts); no other address is ever contacted.
 */
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { egressNameResolver } from '../src/runtime/docker/egress-proxy.ts';
import { curlFromSandbox, REFUSED, tcpProbe } from './support/sandbox-probes.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const NETWORK = 'tidepool-egress-test';
const originalResolve = egressNameResolver.resolve;
let platform: TestPlatform;
let standin: StandinHosts;
let first = '';
let second = '';

async function reaches(sbx: Sandbox, address: string): Promise<boolean> {
  const probe = await tcpProbe(sbx, address, 8099);
  if (!probe.open) expect(probe.error).toMatch(REFUSED);
  return probe.open && probe.output === `hi ${address}`;
}

async function reachability(sbx: Sandbox): Promise<[boolean, boolean]> {
  return [await reaches(sbx, first), await reaches(sbx, second)];
}

const create = (options: Record<string, unknown> = {}): Promise<Sandbox> => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, ...options });

beforeAll(async () => {
  platform = await startTestPlatform({ sandboxNetwork: NETWORK });
  standin = await startStandinHosts(2);
  [first, second] = standin.internet;
  // The platform resolves allowed names itself (never the sandbox's say): these map to the test's own hosts.
  const names: Record<string, string> = { 'allowed.standin.test': first, 'other.standin.test': second, 'deep.x.wild.standin.test': second, 'wild.standin.test': second, 'evil.standin.test': standin.privateAddresses[0]! };
  egressNameResolver.resolve = async (name) => (names[name] ? [names[name]!] : originalResolve(name));
}, 600_000);

afterAll(async () => {
  egressNameResolver.resolve = originalResolve;
  await standin?.stop();
  await platform?.dispose();
});

describe('egress rules', () => {
  it('allows the outside by default', async () => {
    const sbx = await create();
    expect(await reachability(sbx)).toEqual([true, true]);
    await sbx.kill();
  });

  it('denies CIDRs, lets allowed IPs beat denied ranges, and never opens private ranges', async () => {
    const [denied, onlyFirst, offline, privateAllowed] = await Promise.all([
      create({ network: { denyOut: ['198.18.0.0/15'] } }),
      create({ network: { allowOut: [first], denyOut: ['0.0.0.0/0'] } }),
      create({ allowInternetAccess: false }),
      create({ network: { allowOut: [standin.privateAddresses[0]!] } }),
    ]);
    expect(await reachability(denied)).toEqual([false, false]);
    expect(await reachability(onlyFirst)).toEqual([true, false]);
    expect(await reachability(offline)).toEqual([false, false]);
    expect(await reaches(privateAllowed, standin.privateAddresses[0]!)).toBe(false);
    await Promise.all([denied, onlyFirst, offline, privateAllowed].map((s) => s.kill()));
  });

  it('PUT /network flips the rules live (the SDK), clears omitted lists, and answers 404 JSON for unknown sandboxes', async () => {
    const sbx = await create();
    expect(await reachability(sbx)).toEqual([true, true]);
    await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: [second] });
    expect(await reachability(sbx)).toEqual([false, true]);
    expect(platform.lifecycle.get(sbx.sandboxId)!.network).toMatchObject({ allowOut: [second], denyOut: ['0.0.0.0/0'] });
    await sbx.updateNetwork({ allowInternetAccess: false });
    expect(await reachability(sbx)).toEqual([false, false]);
    await sbx.updateNetwork({});
    expect(await reachability(sbx)).toEqual([true, true]);
    const missing = await api(platform, 'PUT', '/sandboxes/inotthere000000000000/network', { denyOut: ['0.0.0.0/0'] });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 404 });
    const invalid = await api(platform, 'PUT', `/sandboxes/${sbx.sandboxId}/network`, { allowOut: ['example.com'] });
    expect(invalid.status).toBe(400);
    expect(await reachability(sbx)).toEqual([true, true]);
    await sbx.kill();
  });

  it('keeps the rules across a snapshot, pause/resume (memory and filesystem) and an API restart', async () => {
    let sbx = await create({ network: { allowOut: [first], denyOut: ['198.18.0.0/15'] } });
    expect(await reachability(sbx)).toEqual([true, false]);
    await sbx.createSnapshot();
    expect(await reachability(sbx)).toEqual([true, false]);
    await sbx.pause();
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await reachability(sbx)).toEqual([true, false]);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    // Changed while paused to disk: in force when it boots again (at a new address).
    await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [second, 'allowed.standin.test'], denyOut: ['0.0.0.0/0'] }, platform.sdk);
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await reachability(sbx)).toEqual([false, true]);
    const viaName = (s: Sandbox) => curlFromSandbox(s, 'http://allowed.standin.test/', `allowed.standin.test:80:${first}`);
    expect(await viaName(sbx)).toEqual({ ok: true, body: 'host allowed.standin.test' });

    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ sandboxNetwork: NETWORK, apiKeys: [apiKey] }, dataDir);
    sbx = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, apiKey });
    expect(await reachability(sbx)).toEqual([false, true]);
    // The new platform's egress proxy (new ports) takes over the domain rules.
    expect(await viaName(sbx)).toEqual({ ok: true, body: 'host allowed.standin.test' });
    await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [first], denyOut: ['0.0.0.0/0'] }, { ...platform.sdk, apiKey });
    expect(await reachability(sbx)).toEqual([true, false]);
    await Sandbox.kill(sbx.sandboxId, { ...platform.sdk, apiKey });
  });

  it('allows domains by HTTP Host and TLS SNI with everything else denied, dialing the name itself', async () => {
    {
      const sbx = await create({ network: { allowOut: ['allowed.standin.test', '*.wild.standin.test', 'evil.standin.test'], denyOut: ['0.0.0.0/0'] } });
      // The sandbox claims another address for the name: the connection still goes where the platform resolves it.
      const http = (name: string) => curlFromSandbox(sbx, `http://${name}/`, `${name}:80:${second}`);
      const https = (name: string) => curlFromSandbox(sbx, `https://${name}/`, `${name}:443:${second}`);
      expect(await http('allowed.standin.test')).toEqual({ ok: true, body: 'host allowed.standin.test' });
      expect(await https('allowed.standin.test')).toEqual({ ok: true, body: 'tls allowed.standin.test' });
      expect(await https('deep.x.wild.standin.test')).toEqual({ ok: true, body: 'tls deep.x.wild.standin.test' });
      expect((await https('wild.standin.test')).ok).toBe(false);
      expect((await http('other.standin.test')).ok).toBe(false);
      expect((await https('other.standin.test')).ok).toBe(false);
      expect((await http('evil.standin.test')).ok).toBe(false);
      // Other ports are CIDR-only: denied.
      expect(await reachability(sbx)).toEqual([false, false]);

      await sbx.updateNetwork({ allowOut: ['other.standin.test'], denyOut: ['0.0.0.0/0'] });
      expect(await http('other.standin.test')).toEqual({ ok: true, body: 'host other.standin.test' });
      expect((await http('allowed.standin.test')).ok).toBe(false);
      await sbx.updateNetwork({});
      expect(await reachability(sbx)).toEqual([true, true]);
      await sbx.kill();
    }
  });
});

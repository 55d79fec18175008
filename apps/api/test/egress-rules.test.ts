/**
 * Egress rules (allowOut / denyOut / allow_internet_access / PUT /network) enforced on real sandboxes through
 * the platform and the e2b SDK. "The internet" is a network namespace the test creates, with addresses in
 * 198.18.0.0/15 (see support/standin-hosts.ts); no other address is ever contacted.
 */
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tcpProbe } from './support/sandbox-probes.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const NETWORK = 'tidepool-egress-test';
let platform: TestPlatform;
let standin: StandinHosts;
let first = '';
let second = '';

async function reaches(sbx: Sandbox, address: string): Promise<boolean> {
  const probe = await tcpProbe(sbx, address, 8099);
  if (!probe.open) expect(probe.ms).toBeLessThan(2000);
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
}, 600_000);

afterAll(async () => {
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

  it('keeps the rules across pause/resume (memory and filesystem) and an API restart', async () => {
    let sbx = await create({ network: { allowOut: [first], denyOut: ['198.18.0.0/15'] } });
    expect(await reachability(sbx)).toEqual([true, false]);
    await sbx.pause();
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await reachability(sbx)).toEqual([true, false]);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    // Changed while paused to disk: in force when it boots again (at a new address).
    await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [second], denyOut: ['0.0.0.0/0'] }, platform.sdk);
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await reachability(sbx)).toEqual([false, true]);

    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ sandboxNetwork: NETWORK, apiKeys: [apiKey] }, dataDir);
    sbx = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, apiKey });
    expect(await reachability(sbx)).toEqual([false, true]);
    await Sandbox.updateNetwork(sbx.sandboxId, { allowOut: [first], denyOut: ['0.0.0.0/0'] }, { ...platform.sdk, apiKey });
    expect(await reachability(sbx)).toEqual([true, false]);
    await Sandbox.kill(sbx.sandboxId, { ...platform.sdk, apiKey });
  });
});

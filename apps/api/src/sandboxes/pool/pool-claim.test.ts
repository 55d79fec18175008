import pino from 'pino';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { claimPooled, isOpenPolicy } from './pool-claim.ts';
import { envdInitOf } from '../lifecycle/sandbox-boot.ts';
import { runStartCommand } from '../lifecycle/start-command.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { PooledContainer } from './warm-pool.ts';

// An envd that records each /init; the start command is the real one (it returns at once without a start command,
// and the case whose start command runs already must not reach it).
const inits: unknown[] = [];
const envd = {
  initEnvd: async (_address: string, init: unknown) => {
    inits.push(init);
    return '0.6.14';
  },
  runStartCommand,
};

const logger = pino({ level: 'silent' });
const defaults = { user: 'user', workdir: '/home/user', envs: { FROM_TEMPLATE: '1' }, startCmd: null, readyCmd: null };
const runtime = { remove: vi.fn(async () => undefined) } as unknown as SandboxRuntime;

function record(envVars: Record<string, string>, token = 'tok'): SandboxRecord {
  return { sandboxId: 'sbx1', defaults, envVars, envdAccessToken: token, network: {} } as unknown as SandboxRecord;
}

function pooled(): PooledContainer {
  const init = envdInitOf(defaults, {}, 'tok');
  return { sandboxId: 'sbx1', containerId: 'c1', address: '10.0.0.9', key: 'b/2/512', templateId: 't', initialised: { init, envdVersion: '0.6.13' }, startCommandRunning: false, release: () => undefined };
}

beforeEach(() => {
  inits.length = 0;
});

describe('claimPooled', () => {
  it('does not tell envd again what it was told while it warmed (a create without env vars)', async () => {
    const booted = await claimPooled(envd, runtime, record({}), pooled(), logger);
    expect(inits).toEqual([]);
    expect(booted).toEqual({ containerId: 'c1', address: '10.0.0.9', envdVersion: '0.6.13' });
  });

  it('sends /init when the sandbox has env vars of its own or anything else differs', async () => {
    await claimPooled(envd, runtime, record({ MINE: 'x' }), pooled(), logger);
    expect(inits).toEqual([{ envVars: { FROM_TEMPLATE: '1', MINE: 'x' }, accessToken: 'tok', defaultUser: 'user', defaultWorkdir: '/home/user' }]);
    // Overriding a template variable with its own value changes nothing, so no /init either.
    inits.length = 0;
    await claimPooled(envd, runtime, record({ FROM_TEMPLATE: '1' }), pooled(), logger);
    expect(inits).toEqual([]);
    await claimPooled(envd, runtime, record({}, 'other-token'), pooled(), logger);
    expect(inits).toHaveLength(1);
    expect(runtime.remove).not.toHaveBeenCalled();
  });

  it('leaves a start command begun while warming alone for a claim with the same /init; any other claim is refused and the container removed', async () => {
    const withStart = { ...defaults, startCmd: 'server', readyCmd: 'check' };
    const warm = (): PooledContainer => ({
      ...pooled(),
      // Nothing listens there: starting the command again or sending /init would fail the claim.
      address: '127.0.0.1:9',
      initialised: { init: envdInitOf(withStart, {}, 'tok'), envdVersion: '0.6.13' },
      startCommandRunning: true,
    });
    const same = { ...record({}), defaults: withStart } as SandboxRecord;
    await expect(claimPooled(envd, runtime, same, warm(), logger)).resolves.toEqual({ containerId: 'c1', address: '127.0.0.1:9', envdVersion: '0.6.13' });
    expect(inits).toEqual([]);
    expect(runtime.remove).not.toHaveBeenCalled();

    const other = { ...record({ MINE: 'x' }), defaults: withStart } as SandboxRecord;
    await expect(claimPooled(envd, runtime, other, warm(), logger)).rejects.toThrow(/start command already runs/);
    expect(inits).toEqual([]);
    expect(runtime.remove).toHaveBeenCalledWith('c1');
  });

  it('puts a sandbox egress proxy in force on the claimed container, its password opened for the dialer', async () => {
    const applied: unknown[] = [];
    const withEgress = { ...runtime, applyEgress: async (_id: string, _address: string, policy: unknown) => void applied.push(policy) } as unknown as SandboxRuntime;
    const proxied = { ...record({}), network: { egressProxy: { address: '198.18.60.3:1080', protocol: 'socks5', host: '198.18.60.3', port: 1080, username: 'u', sealedPassword: 'sealed' } } } as SandboxRecord;
    await claimPooled(envd, withEgress, proxied, pooled(), logger, (sealed) => `opened-${sealed}`);
    expect(applied).toEqual([{ allow: [], deny: [], domains: [], upstream: { protocol: 'socks5', host: '198.18.60.3', port: 1080, username: 'u', password: 'opened-sealed' } }]);
    expect(isOpenPolicy({ allow: [], deny: [], upstream: { protocol: 'http', host: 'p', port: 1 } })).toBe(false);
  });
});

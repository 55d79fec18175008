import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { NodeSet } from '../../nodes/node-set.ts';
import { SqliteDatabase } from '../../store/sqlite-database.ts';
import { EGRESS_CA_FILE, egressTrustEnv, type EgressTrustSource, SYSTEM_CA_BUNDLE } from './egress-trust.ts';
import { SandboxLifecycle } from '../lifecycle/sandbox-lifecycle.ts';
import { SandboxStore } from '../registry/sandbox-store.ts';
import { SandboxRegistry } from '../registry/sandbox-registry.ts';
import { SandboxSlots } from '../registry/sandbox-slots.ts';
import { SandboxCreations } from '../lifecycle/sandbox-creations.ts';
import type { NodeSet as Nodes } from '../../nodes/node-set.ts';

const rules = { 'api.example.com': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.tok}' } } }] };

describe('egress trust environment', () => {
  it('points the usual libraries at the CA only when the sandbox has transforms', () => {
    expect(egressTrustEnv({})).toEqual({});
    expect(egressTrustEnv({ rules: {} })).toEqual({});
    expect(egressTrustEnv({ rules })).toEqual({ NODE_EXTRA_CA_CERTS: EGRESS_CA_FILE, REQUESTS_CA_BUNDLE: SYSTEM_CA_BUNDLE, SSL_CERT_FILE: SYSTEM_CA_BUNDLE, CURL_CA_BUNDLE: SYSTEM_CA_BUNDLE });
  });
});

describe('network.rules where they cannot be applied', () => {
  let dir: string;
  let db: SqliteDatabase;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tidepool-egress-trust-'));
    db = SqliteDatabase.open(dir);
  });
  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const trust: EgressTrustSource = { caCertificate: async () => 'pem', pushSecrets: async () => undefined, forget: () => undefined };
  // Nothing here gets as far as a container or an envd.
  const unreached = () => Promise.reject(new Error('a boot or envd call was reached'));
  const lifecycleOn = (nodes: Nodes, egressTrust?: EgressTrustSource): SandboxLifecycle => {
    const templates = { resolve: () => Promise.reject(new Error('template resolution reached')), recordSpawn: async () => undefined };
    const store = new SandboxStore(db);
    const registry = new SandboxRegistry(store);
    return new SandboxLifecycle({
      store, registry, slots: new SandboxSlots(registry, { maxSandboxes: 10 }), creations: new SandboxCreations(),
      boot: { cold: unreached, claim: unreached }, envd: { initEnvd: unreached, readEnvdMetrics: unreached },
      templates, nodes, tokenSeed: 'seed', defaultTimeoutSeconds: 15, logger: pino({ level: 'silent' }), egressTrust,
    });
  };
  const lifecycle = (runtime: Partial<SandboxRuntime>, egressTrust?: EgressTrustSource): SandboxLifecycle => lifecycleOn(NodeSet.single('local', runtime as SandboxRuntime), egressTrust);
  const input = (network: Record<string, unknown>) =>
    ({ templateRef: 'base', timeoutSeconds: 60, autoPause: false, autoPauseMemory: true, autoResume: false, metadata: {}, envVars: {}, network, allowInternetAccess: null, volumeMounts: [] }) as never;

  it('are refused with 400 (not accepted and ignored) without an egress proxy that applies them or without CAs', async () => {
    await expect(lifecycle({}, trust).create(input({ rules }))).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/network.rules cannot be applied here/) });
    await expect(lifecycle({ egressTransformsAvailable: async () => false }, trust).create(input({ rules }))).rejects.toMatchObject({ kind: 'invalid' });
    await expect(lifecycle({ egressTransformsAvailable: async () => true }).create(input({ rules }))).rejects.toMatchObject({ kind: 'invalid' });
    // Where they can be applied, the create goes on (here: to the template lookup); without rules nothing is asked.
    await expect(lifecycle({ egressTransformsAvailable: async () => true }, trust).create(input({ rules }))).rejects.toThrow('template resolution reached');
    await expect(lifecycle({}).create(input({}))).rejects.toThrow('template resolution reached');
  });

  it('with several nodes, are refused only when no node applies them', async () => {
    const withNodes = (...available: boolean[]): SandboxLifecycle => {
      const nodes = new NodeSet('n0');
      available.forEach((yes, i) => nodes.add({ nodeId: `n${i}`, runtime: { egressTransformsAvailable: async () => yes } as unknown as SandboxRuntime, dial: () => Promise.reject(new Error('no dial')) }));
      return lifecycleOn(nodes, trust);
    };
    await expect(withNodes(false, false).create(input({ rules }))).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/network.rules cannot be applied here/) });
    await expect(withNodes(false, true).create(input({ rules }))).rejects.toThrow('template resolution reached');
  });
});

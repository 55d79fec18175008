import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../config.ts';
import { clusterClientTls, remoteNodeFactory } from './cluster-nodes.ts';
import { NodeSet } from './node-set.ts';
import type { NodeRow } from './node-store.ts';

const row = (nodeId: string, url: string): NodeRow => ({ nodeId, url, version: '1', capacity: { cpuCount: 2, memoryMB: 2048, memoryAvailableMB: 2048 }, status: 'ready', lastHeartbeat: Date.now(), registeredAt: new Date().toISOString(), identity: '' });
const tls = { ca: 'ca', cert: 'cert', key: 'key' };

describe('cluster node factory', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('drives agents (https rows) and leaves other replicas’ in-process nodes and garbage URLs unheld', () => {
    const lines: string[] = [];
    const factory = remoteNodeFactory(tls, pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }));
    const set = new NodeSet('api-1', { nodeFor: factory });
    const { added } = set.update([row('node1', 'https://198.19.0.11:7443'), row('api-2', 'embedded://api-2'), row('odd', 'not a url'), row('plain', 'http://198.19.0.12:7443')]);
    expect(added).toEqual(['node1']);
    expect(set.has('node1')).toBe(true);
    expect(set.has('api-2')).toBe(false);
    expect(set.has('odd')).toBe(false);
    expect(set.has('plain')).toBe(false);
    // Asked again at every sweep, said once.
    set.update([row('api-2', 'embedded://api-2')]);
    expect(lines.filter((l) => l.includes('api-2'))).toHaveLength(1);
  });

  it('reads the client certificate, key and CA once, naming the setting whose file is missing', () => {
    expect(clusterClientTls({ clusterClientCert: '', clusterClientKey: '', clusterCa: '' })).toBeUndefined();
    dir = mkdtempSync(join(tmpdir(), 'tidepool-cluster-tls-'));
    for (const f of ['c.pem', 'k.pem', 'ca.pem']) writeFileSync(join(dir, f), `${f}\n`);
    const read = clusterClientTls({ clusterClientCert: join(dir, 'c.pem'), clusterClientKey: join(dir, 'k.pem'), clusterCa: join(dir, 'ca.pem') });
    expect(read?.cert.toString()).toBe('c.pem\n');
    expect(read?.ca.toString()).toBe('ca.pem\n');
    const missing = (): unknown => clusterClientTls({ clusterClientCert: join(dir!, 'c.pem'), clusterClientKey: join(dir!, 'nope.pem'), clusterCa: join(dir!, 'ca.pem') });
    expect(missing).toThrow(ConfigError);
    expect(missing).toThrow(/TIDEPOOL_CLUSTER_CLIENT_KEY: cannot read .*nope\.pem \(ENOENT\)/);
  });
});

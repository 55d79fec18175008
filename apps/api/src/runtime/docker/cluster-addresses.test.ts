import type os from 'node:os';
import { describe, expect, it } from 'vitest';
import { ClusterAddresses, clusterDeniedCidrs, clusterHostsOf } from './cluster-addresses.ts';

const nic = (address: string): os.NetworkInterfaceInfo =>
  ({ address, netmask: '255.255.255.0', family: address.includes(':') ? 'IPv6' : 'IPv4', mac: '00:00:00:00:00:00', internal: false, cidr: null }) as os.NetworkInterfaceInfo;

describe('clusterHostsOf', () => {
  it("names the database, registry, public name, sandbox domain and node URL hosts", () => {
    expect(clusterHostsOf({
      databaseUrl: 'postgres://tp:secret@db.internal:5432/tidepool',
      registry: 'registry.example.com:5000/tidepool',
      publicDomain: 'sandboxes.example.com:8443',
      domain: 'sandboxes.example.com',
      nodeUrl: 'https://[fd00::7]:7443',
    })).toEqual(['db.internal', 'registry.example.com', 'sandboxes.example.com', 'fd00::7']);
    expect(clusterHostsOf({ databaseUrl: '', registry: '', publicDomain: '', domain: 'tidepool.local', nodeUrl: '' })).toEqual(['tidepool.local']);
  });
});

describe('ClusterAddresses', () => {
  it("knows this machine's interface addresses, IPv4-mapped and zoned spellings included", async () => {
    const own = new ClusterAddresses([], () => ({ eth0: [nic('203.0.113.7'), nic('fe80::1')] }), async () => []);
    expect(await own.includes('203.0.113.7')).toBe(true);
    expect(await own.includes('::ffff:203.0.113.7')).toBe(true);
    expect(await own.includes('fe80::1%eth0')).toBe(true);
    expect(await own.includes('203.0.113.8')).toBe(false);
  });

  it('resolves the service hosts, reuses the answer for a minute and ignores a host that does not resolve', async () => {
    const lookups: string[] = [];
    const own = new ClusterAddresses(['db.internal', 'gone.internal', '198.51.100.4'], () => ({}), async (name) => {
      lookups.push(name);
      if (name === 'gone.internal') throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
      return ['198.51.100.3'];
    });
    expect(await own.includes('198.51.100.3')).toBe(true);
    expect(await own.includes('198.51.100.4')).toBe(true);
    expect(await own.includes('198.51.100.5')).toBe(false);
    expect(lookups).toEqual(['db.internal', 'gone.internal']);
  });

  it("denies sandboxes the operator's cluster networks and every cluster service named by an IP address (names are left to the list)", () => {
    const denied = clusterDeniedCidrs({
      databaseUrl: 'postgres://tidepool@198.19.57.11:5432/tidepool',
      registry: '198.19.57.11:5000/tidepool',
      publicDomain: '',
      domain: 'tidepool.localhost',
      nodeUrl: 'https://[2001:db8::7]:7443',
      clusterCidrs: ['203.0.113.0/24'],
    });
    expect(denied).toEqual(['203.0.113.0/24', '198.19.57.11/32', '2001:db8::7/128']);
    expect(clusterDeniedCidrs({ databaseUrl: 'postgres://db.internal/x', registry: 'registry.internal:5000', publicDomain: '', domain: 'd.example', nodeUrl: '', clusterCidrs: [] })).toEqual([]);
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { machineBinds, machineOf } from './cluster-swarm.ts';
import { clusterEnv, type ClusterState } from './local-cluster.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-swarm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const members = [
  { swarmId: 'km9uft5gfvqro2phnwhmjxto9', node: 'node1', address: '198.19.9.11', role: 'manager' as const },
  { swarmId: 'd6krukgkfex6roatxbbp1432c', node: 'node2', address: '198.19.9.12', role: 'worker' as const },
];

describe('swarm mode of the local cluster', () => {
  it('names a machine by the id the API reports (its Swarm node id) or by its own name', () => {
    expect(machineOf({ members }, 'd6krukgkfex6roatxbbp1432c')).toBe('node2');
    expect(machineOf({ members }, 'node1')).toBe('node1');
    expect(machineOf(undefined, 'node3')).toBe('node3');
  });

  it("gives each machine its own agent data, /etc/docker and node certificate under the node's directory", () => {
    expect(machineBinds({ dir: '/c/node2' })).toEqual([
      ['/c/node2/machine/tidepool-node', '/var/lib/tidepool/node'],
      ['/c/node2/machine/etc-docker', '/etc/docker'],
      ['/c/node2/machine/node-tls', '/etc/tidepool/node-tls'],
    ]);
  });

  it("`env` prints the stack's published API, the keys, the second replica and each machine's Swarm node id", () => {
    const node = (index: number) => ({ id: `node${index}`, index, address: `198.19.9.${10 + index}`, dockerHost: `unix:///c/node${index}/docker.sock`, tcpHost: null, agentUrl: null });
    const state = {
      version: 1,
      name: 'sw',
      slot: 9,
      dir,
      registry: { host: '198.19.9.1:5000', url: 'http://198.19.9.1:5000', username: 'builder', password: 'pw' },
      tls: null,
      postgres: null,
      nodes: [node(1), node(2)],
      apiKey: 'e2b_key',
      adminKey: 'admin-key',
      swarm: { stack: 'tidepool', dir, envFile: join(dir, 'tidepool.env'), members, apiUrls: ['http://198.19.9.11:3000', 'http://198.19.9.12:3000'], port: 3000, registry: '198.19.9.11:5000', builtImages: [], timings: {} },
    } as unknown as ClusterState;
    const lines = clusterEnv(state);
    expect(lines).toEqual(
      expect.arrayContaining([
        'DOCKER_HOST_1=unix:///c/node1/docker.sock',
        'DOCKER_HOST_2=unix:///c/node2/docker.sock',
        'TIDEPOOL_SWARM_NODE_2=d6krukgkfex6roatxbbp1432c',
        'E2B_API_URL=http://198.19.9.11:3000',
        'E2B_SANDBOX_URL=http://198.19.9.11:3000',
        'E2B_API_KEY=e2b_key',
        'API_URL_2=http://198.19.9.12:3000',
        'TIDEPOOL_ADMIN_KEY=admin-key',
      ]),
    );
  });
});

import { describe, expect, it } from 'vitest';
import { NodeChannelError } from '../../nodes/node-channel-errors.ts';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { egressProblemOn, nodesWithoutEgress } from './egress-nodes.ts';
import type { SandboxNetwork } from '../registry/sandbox-record.ts';

const rules = { 'api.example.com': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.tok}' } } }] };
const proxy = { egressProxy: { protocol: 'socks5', host: '198.18.60.3', port: 1080 } } as unknown as SandboxNetwork;

/** A node whose runtime answers the two questions as given (an in-process node without the proxy has neither method). */
function node(nodeId: string, runtime: Partial<SandboxRuntime>): SandboxNode {
  return { nodeId, runtime: runtime as SandboxRuntime, dial: () => Promise.reject(new Error('no dial')) };
}
const embedded = node('embedded', { egressTransformsAvailable: async () => true, egressUpstreamProblem: async () => undefined });
const agent = node('agent', {});
/** An agent from before version 2: the channel answers the egress calls with "unknown method". */
const unknownMethod = () => Promise.reject(new NodeChannelError('bad_call', 'unknown method "egressTransformsAvailable"', 'old'));
const oldAgent = node('old', { egressTransformsAvailable: unknownMethod, egressUpstreamProblem: unknownMethod });
const broken = node('broken', { egressTransformsAvailable: () => Promise.reject(new Error('channel down')), egressUpstreamProblem: () => Promise.reject(new Error('channel down')) });

describe('nodes that can apply network.rules and egressProxy', () => {
  it('a network without either leaves every node in (nothing is asked)', async () => {
    expect(await nodesWithoutEgress([agent, broken], { allowOut: ['198.18.0.0/15'] }, true)).toEqual(new Set());
  });

  it('leaves out the nodes without the egress proxy or tunnel (an agent, a node that does not answer), keeping the others', async () => {
    expect(await nodesWithoutEgress([embedded, agent, broken], { rules }, true)).toEqual(new Set(['agent', 'broken']));
    expect(await nodesWithoutEgress([embedded, agent, broken], proxy, true)).toEqual(new Set(['agent', 'broken']));
    expect(await nodesWithoutEgress([embedded, agent], { ...proxy, rules }, true)).toEqual(new Set(['agent']));
  });

  it('refuses with 400 when no node can: "here" for rules, the node and the reason for egressProxy', async () => {
    await expect(nodesWithoutEgress([agent, broken], { rules }, true)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/^network.rules cannot be applied here: .*node agent of version 2 or later/) });
    // Without per-sandbox CAs configured, even the embedded node cannot terminate TLS for the rules.
    await expect(nodesWithoutEgress([embedded], { rules }, false)).rejects.toMatchObject({ kind: 'invalid' });
    await expect(nodesWithoutEgress([agent], proxy, true)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/^network.egressProxy cannot be applied on node "agent": its runtime cannot tunnel sandbox egress/) });
    const tunnelDown = node('down', { egressUpstreamProblem: async () => 'the egress tunnel is not running' });
    await expect(nodesWithoutEgress([tunnelDown], proxy, true)).rejects.toMatchObject({ message: 'network.egressProxy cannot be applied on node "down": the egress tunnel is not running' });
  });

  it('an agent too old for the egress calls is left out, and named with the fix when it is the only node', async () => {
    expect(await nodesWithoutEgress([embedded, oldAgent], { rules }, true)).toEqual(new Set(['old']));
    await expect(nodesWithoutEgress([oldAgent], { rules }, true)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/^network.rules cannot be applied on node "old": its node agent is too old .*version 2/) });
    await expect(nodesWithoutEgress([oldAgent], proxy, true)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/^network.egressProxy cannot be applied on node "old": its node agent is too old/) });
  });

  it('names the node for one sandbox (a network update on the agent)', async () => {
    expect((await egressProblemOn(agent, { rules }, true))?.message).toMatch(/^network.rules cannot be applied on node "agent"/);
    expect(await egressProblemOn(embedded, { rules, ...proxy }, true)).toBeUndefined();
  });
});

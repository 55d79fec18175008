import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NodeEgress, SandboxNode } from '../../nodes/sandbox-node.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { SandboxEgress } from './sandbox-egress.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

const rule = (...secrets: string[]) => ({ 'api.example.com': [{ transform: { headers: Object.fromEntries(secrets.map((s, i) => [`X-${i}`, `v \${e2b.secrets.${s}}`])) } }] });

/** A node agent's egress state as calls recorded (what was pushed, per sandbox). */
function agentEgress(): NodeEgress & { pushed: Array<[string, Record<string, string>]>; forgotten: string[] } {
  const pushed: Array<[string, Record<string, string>]> = [];
  const forgotten: string[] = [];
  return {
    pushed,
    forgotten,
    caCertificate: async (id) => `agent-ca-${id}`,
    pushSecrets: async (id, secrets) => void pushed.push([id, secrets]),
    forget: async (id) => void forgotten.push(id),
  };
}

function setup(records: Partial<SandboxRecord>[] = []) {
  const agent = agentEgress();
  const down = agentEgress();
  const localForgotten: string[] = [];
  const nodes: Record<string, SandboxNode> = {
    agent: { nodeId: 'agent', runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('no dial')), egress: agent },
    down: { nodeId: 'down', runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('no dial')), egress: down },
    embedded: { nodeId: 'embedded', runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('no dial')) },
  };
  const values: Record<string, Record<string, string>> = { t1: { tok: 'team1-tok', other: 'team1-other' }, t2: { tok: 'team2-tok' } };
  const egress = new SandboxEgress({
    node: (id) => nodes[id],
    local: { caCertificate: async (id) => `local-ca-${id}`, forget: async (id) => void localForgotten.push(id) },
    secretValue: async (teamId, name) => values[teamId]?.[name],
    records: () => records as SandboxRecord[],
    live: (id) => id !== 'down',
    logger: pino({ level: 'silent' }),
  });
  return { egress, agent, down, localForgotten, values };
}

const sandbox = (sandboxId: string, nodeId: string, teamId: string, network: SandboxRecord['network'], containerId: string | null = 'c') => ({ sandboxId, nodeId, teamId, network, containerId });

describe('SandboxEgress', () => {
  it('pushes to an agent the values of the secrets the sandbox\'s rules name, among its own team\'s only (a missing one left out)', async () => {
    const { egress, agent } = setup();
    await egress.pushSecrets(sandbox('s1', 'agent', 't1', { rules: rule('TOK', 'other', 'gone') }));
    await egress.pushSecrets(sandbox('s2', 'agent', 't2', { rules: rule('tok', 'other') }));
    expect(agent.pushed).toEqual([
      ['s1', { tok: 'team1-tok', other: 'team1-other' }],
      ['s2', { tok: 'team2-tok' }],
    ]);
    // Rules removed: the node's values are cleared.
    await egress.pushSecrets(sandbox('s1', 'agent', 't1', {}));
    expect(agent.pushed.at(-1)).toEqual(['s1', {}]);
  });

  it('pushes nothing to a node that resolves secrets itself; CAs and forgetting go to the sandbox\'s node', async () => {
    const { egress, agent, localForgotten } = setup();
    await egress.pushSecrets(sandbox('s1', 'embedded', 't1', { rules: rule('tok') }));
    expect(agent.pushed).toEqual([]);
    expect(await egress.caCertificate(sandbox('s1', 'embedded', 't1', {}))).toBe('local-ca-s1');
    expect(await egress.caCertificate(sandbox('s2', 'agent', 't1', {}))).toBe('agent-ca-s2');
    egress.forget(sandbox('s1', 'embedded', 't1', {}));
    egress.forget(sandbox('s2', 'agent', 't1', { rules: rule('tok') }));
    // An agent is not called for a sandbox without rules (its kill costs no egress call).
    egress.forget(sandbox('s3', 'agent', 't1', {}));
    await new Promise((resolve) => setImmediate(resolve));
    expect(localForgotten).toEqual(['s1']);
    expect(agent.forgotten).toEqual(['s2']);
  });

  it('after a secret change, pushes again to exactly the running sandboxes of that team on live agents whose rules name it', async () => {
    const records = [
      sandbox('hit', 'agent', 't1', { rules: rule('tok') }),
      sandbox('hit-any-case', 'agent', 't1', { rules: rule('TOK', 'other') }),
      sandbox('other-team', 'agent', 't2', { rules: rule('tok') }),
      sandbox('other-secret', 'agent', 't1', { rules: rule('other') }),
      sandbox('no-rules', 'agent', 't1', {}),
      sandbox('paused-to-disk', 'agent', 't1', { rules: rule('tok') }, null),
      sandbox('embedded', 'embedded', 't1', { rules: rule('tok') }),
      sandbox('lost-node', 'down', 't1', { rules: rule('tok') }),
    ];
    const { egress, agent, down, values } = setup(records);
    values.t1!.tok = 'rotated';
    await egress.secretChanged('t1', 'Tok');
    expect(agent.pushed.map(([id, secrets]) => [id, secrets.tok])).toEqual([['hit', 'rotated'], ['hit-any-case', 'rotated']]);
    expect(down.pushed).toEqual([]);
  });

  it('a failed push after a secret change is logged, not thrown (the secret route still answers)', async () => {
    const { egress, agent } = setup([sandbox('hit', 'agent', 't1', { rules: rule('tok') })]);
    agent.pushSecrets = () => Promise.reject(new Error('channel down'));
    await expect(egress.secretChanged('t1', 'tok')).resolves.toBeUndefined();
  });
});

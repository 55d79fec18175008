import { describe, expect, it } from 'vitest';
import { PlatformError } from '../../errors.ts';
import { TeamQuotaError } from '../../teams/team-quotas.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import { SandboxRegistry } from './sandbox-registry.ts';
import { SandboxSlots } from './sandbox-slots.ts';
import type { SandboxStore } from './sandbox-store.ts';

const store = { save: async () => undefined, recordEvent: async () => undefined } as unknown as SandboxStore;
const running = (sandboxId: string, teamId: string) => ({ sandboxId, teamId, containerId: `c-${sandboxId}` }) as SandboxRecord;

const refusal = async (promise: Promise<unknown>): Promise<Error> => {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal');
};

describe('SandboxSlots (one process)', () => {
  it("refuses a team at its quota before the platform's limit, and a pool claim (no platform slot) still takes the team's", async () => {
    const registry = new SandboxRegistry(store);
    const slots = new SandboxSlots(registry, { maxSandboxes: 5, teamMaxSandboxes: 2 });
    await registry.persist(running('a1', 'a'));
    await slots.reserveFor('a2', 'a', 'create', false);
    const refused = await refusal(slots.reserveFor('a3', 'a', 'create'));
    expect(refused).toBeInstanceOf(TeamQuotaError);
    expect(refused.message).toMatch(/^team sandbox quota reached: 2 running \(TIDEPOOL_TEAM_MAX_SANDBOXES=2\)/);
    // The refused create took no platform slot; another team has the platform's room.
    expect(slots.freeSlots()).toBe(4);
    await slots.reserveFor('b1', 'b', 'create');
  });

  it("with the quota at its default (the platform's limit) a full platform answers with the platform's own refusal", async () => {
    const registry = new SandboxRegistry(store);
    const slots = new SandboxSlots(registry, { maxSandboxes: 2 });
    await registry.persist(running('a1', 'a'));
    await slots.reserveFor('a2', 'a', 'create');
    const refused = await refusal(slots.reserveFor('a3', 'a', 'create'));
    expect(refused).toBeInstanceOf(PlatformError);
    expect(refused).not.toBeInstanceOf(TeamQuotaError);
    expect(refused.message).toMatch(/maximum number of concurrent sandboxes \(2\)/);
  });
});

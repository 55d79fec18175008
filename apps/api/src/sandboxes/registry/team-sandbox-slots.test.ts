import { describe, expect, it } from 'vitest';
import { TeamQuotaError } from '../../teams/team-quotas.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import { TeamSandboxSlots } from './team-sandbox-slots.ts';

const record = (sandboxId: string, teamId: string, containerId: string | null): SandboxRecord => ({ sandboxId, teamId, containerId }) as SandboxRecord;

describe('TeamSandboxSlots', () => {
  it("counts the team's sandboxes holding a container and those being made; refuses past the quota, changing nothing", () => {
    const records = [record('a1', 'a', 'c1'), record('a2', 'a', null), record('b1', 'b', 'c2')];
    const slots = new TeamSandboxSlots(3, () => records);
    expect(slots.holding('a')).toBe(1);
    slots.take('new1', 'a');
    slots.take('new2', 'a');
    expect(slots.holding('a')).toBe(3);
    const refused = (() => {
      try {
        slots.take('new3', 'a');
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(TeamQuotaError);
    expect((refused as Error).message).toBe("team sandbox quota reached: 3 running (TIDEPOOL_TEAM_MAX_SANDBOXES=3); kill or pause some of the team's sandboxes and try again");
    expect(slots.holding('a')).toBe(3);
    // Another team is not limited by team a's quota.
    slots.take('bnew', 'b');
    expect(slots.holding('b')).toBe(2);
  });

  it('a sandbox whose record holds its container while its slot is still taken counts once; a release frees its slot once', () => {
    const records = [record('a1', 'a', 'c1')];
    const slots = new TeamSandboxSlots(2, () => records);
    const release = slots.take('made', 'a');
    records.push(record('made', 'a', 'c9'));
    expect(slots.holding('a')).toBe(2);
    records.pop();
    release();
    expect(slots.holding('a')).toBe(1);
    // A later take of the same id is not ended by the first take's release called again.
    slots.take('made', 'a');
    release();
    expect(slots.holding('a')).toBe(2);
  });

  it('a filesystem resume of a paused sandbox takes a slot like a create (the paused record itself holds none)', () => {
    const records = [record('a1', 'a', 'c1'), record('paused', 'a', null)];
    const slots = new TeamSandboxSlots(1, () => records);
    expect(() => slots.take('paused', 'a')).toThrow(TeamQuotaError);
    records.shift();
    slots.take('paused', 'a');
    expect(slots.holding('a')).toBe(1);
  });
});

import { describe, expect, it } from 'vitest';
import { execCreateProblem, networkCreateProblem } from './small-body-policy.ts';

describe('execCreateProblem', () => {
  it('refuses privileged execs in any spelling', () => {
    expect(execCreateProblem({ Cmd: ['id'], AttachStdout: true })).toBeUndefined();
    expect(execCreateProblem({ Cmd: ['id'], User: 'root', Privileged: false })).toBeUndefined();
    expect(execCreateProblem({ Cmd: ['id'], Privileged: true })).toMatch(/privileged/);
    expect(execCreateProblem({ Cmd: ['id'], privileged: true })).toMatch(/privileged/);
    expect(execCreateProblem({ Cmd: ['id'], Privileged: false, PRIVILEGED: 'yes' })).toMatch(/privileged/);
    expect(execCreateProblem(null)).toMatch(/object/);
  });
});

describe('networkCreateProblem', () => {
  const spec = { Name: 'tidepool', Driver: 'bridge', CheckDuplicate: true, Labels: { 'dev.tidepool.managed': 'true' }, Options: { 'com.docker.network.bridge.enable_icc': 'false' } };

  it('accepts the sandbox network and nothing else', () => {
    expect(networkCreateProblem(spec)).toBeUndefined();
    expect(networkCreateProblem({ ...spec, Labels: {} })).toMatch(/label/);
    expect(networkCreateProblem({ ...spec, Driver: 'macvlan' })).toMatch(/driver/);
    expect(networkCreateProblem({ ...spec, Options: { 'com.docker.network.bridge.name': 'eth0' } })).toMatch(/option/);
    expect(networkCreateProblem({ ...spec, ConfigFrom: { Network: 'x' } })).toMatch(/not allowed/);
  });
});

import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';
import { shutdownPlan } from './shutdown-policy.ts';

describe('TIDEPOOL_ON_SHUTDOWN', () => {
  it('keeps sandboxes by default (the next start adopts them)', () => {
    const config = loadConfig({});
    expect(config.onShutdown).toBe('keep');
    expect(shutdownPlan(config)).toMatchObject({ keepSandboxes: true });
  });

  it('kills them with `kill`, in any case and with spaces around', () => {
    const config = loadConfig({ TIDEPOOL_ON_SHUTDOWN: ' Kill ' });
    expect(config.onShutdown).toBe('kill');
    expect(shutdownPlan(config)).toMatchObject({ keepSandboxes: false, message: expect.stringContaining('killing every sandbox') });
    expect(shutdownPlan(loadConfig({ TIDEPOOL_ON_SHUTDOWN: 'keep' }))).toMatchObject({ keepSandboxes: true });
  });

  it('refuses anything else, naming the variable and the value', () => {
    expect(() => loadConfig({ TIDEPOOL_ON_SHUTDOWN: 'stop' })).toThrow(ConfigError);
    expect(() => loadConfig({ TIDEPOOL_ON_SHUTDOWN: 'stop' })).toThrow(/TIDEPOOL_ON_SHUTDOWN: .*\(got "stop"\)/);
  });
});

describe('TIDEPOOL_RUNTIME_IMAGE', () => {
  it('defaults to the image scripts/build-images.sh tags and takes another name', () => {
    expect(loadConfig({}).runtimeImage).toBe('tidepool/envd-runtime:latest');
    expect(loadConfig({ TIDEPOOL_RUNTIME_IMAGE: ' stack-compose/envd-runtime:latest ' }).runtimeImage).toBe('stack-compose/envd-runtime:latest');
  });
});

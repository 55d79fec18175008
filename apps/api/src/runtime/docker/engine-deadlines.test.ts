import { describe, expect, it } from 'vitest';
import type { SandboxRuntime } from '../sandbox-runtime.ts';
import { DockerCallError } from './docker-call.ts';
import { withEngineDeadlines } from './engine-deadlines.ts';

const never = () => new Promise<never>(() => undefined);

describe('withEngineDeadlines', () => {
  const runtime = {
    inspect: never,
    startContainer: never,
    remove: async () => {
      throw new Error('engine says no');
    },
    imageExists: async (image: string) => image === 'present',
    watchEvents: never,
  } as unknown as SandboxRuntime;
  const limited = withEngineDeadlines(runtime, { default: 50, startContainer: 80 });

  it('fails a hanging call after its limit, naming the call and its arguments', async () => {
    const started = Date.now();
    const error = await limited.inspect('0123456789ab'.repeat(5) + 'cdef').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DockerCallError);
    expect((error as Error).message).toBe('engine call inspect (0123456789ab): no answer from the Docker engine within 50 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    await expect(limited.startContainer({ sandboxId: 'isbx', templateId: 't', image: 'i', cpuCount: 1, memoryMB: 1 } as never)).rejects.toThrow(
      /^engine call startContainer \(sandbox isbx\): no answer/,
    );
  });

  it('passes answers and other errors through unchanged, and leaves the event stream alone', async () => {
    expect(await limited.imageExists('present')).toBe(true);
    await expect(limited.remove('c1')).rejects.toThrow(/^engine says no$/);
    expect(limited.watchEvents).toBe(runtime.watchEvents);
  });

  it('names every failed call to the metrics hook (errors and deadlines), not the successful ones', async () => {
    const failed: string[] = [];
    const counted = withEngineDeadlines(runtime, { default: 30 }, (operation) => failed.push(operation));
    expect(await counted.imageExists('present')).toBe(true);
    await expect(counted.remove('c1')).rejects.toThrow(/^engine says no$/);
    await expect(counted.inspect('c1')).rejects.toBeInstanceOf(DockerCallError);
    expect(failed).toEqual(['remove', 'inspect']);
  });
});

import { describe, expect, it } from 'vitest';
import { reportingFailures } from './failure-reporting.ts';

class Engine {
  calls = 0;
  async commit(id: string): Promise<string> {
    this.calls += 1;
    if (id === 'bad') throw new Error(`cannot commit ${id}`);
    return `image-of-${id}`;
  }
  async wait(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw new Error('aborted');
  }
  describe(): string {
    return `engine after ${this.calls} calls`;
  }
}

describe('reportingFailures', () => {
  it('reports rejected calls by method name and passes results, errors and sync methods through', async () => {
    const failed: string[] = [];
    const engine = reportingFailures(new Engine(), (operation) => failed.push(operation), 'build_');
    expect(await engine.commit('ok')).toBe('image-of-ok');
    await expect(engine.commit('bad')).rejects.toThrow('cannot commit bad');
    expect(engine.describe()).toBe('engine after 2 calls');
    expect(failed).toEqual(['build_commit']);
  });

  it('does not count calls the caller aborted', async () => {
    const failed: string[] = [];
    const engine = reportingFailures(new Engine(), (operation) => failed.push(operation));
    const controller = new AbortController();
    controller.abort();
    await expect(engine.wait(controller.signal)).rejects.toThrow('aborted');
    expect(failed).toEqual([]);
  });
});

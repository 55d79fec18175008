import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { PlatformError } from '../../errors.ts';
import { ClusterImages } from '../../nodes/cluster-images.ts';
import { NodeSet } from '../../nodes/node-set.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { ForkCheckpoint } from './fork-checkpoint.ts';

const logger = pino({ level: 'silent' });
const PREFIX = '127.0.0.1:1/tp';
const CHECKPOINT = 'tidepool/paused:fork0123456789abcdef';
const REFERENCE = `${PREFIX}/fork:fork0123456789abcdef`;

/** A node's engine as far as a fork checkpoint uses it: image names, and every call recorded. */
class FakeEngine {
  readonly images = new Set<string>();
  readonly calls: string[] = [];
  push: (image: string) => Promise<void> = () => Promise.resolve();
  hangRemovals = false;

  constructor(...images: string[]) {
    for (const image of images) this.images.add(image);
  }

  asRuntime(): SandboxRuntime {
    const engine = this;
    return {
      async claimSandboxImage(image: string, sandboxId: string) {
        engine.calls.push(`claim ${image} ${sandboxId}`);
        if (!engine.images.has(image)) throw new Error(`no such image ${image}`);
        engine.images.add(`tidepool/paused:${sandboxId}`);
        return `tidepool/paused:${sandboxId}`;
      },
      async removeSandboxImage(sandboxId: string) {
        engine.calls.push(`removeSandboxImage ${sandboxId}`);
        engine.images.delete(`tidepool/paused:${sandboxId}`);
      },
      async removeImage(image: string) {
        engine.calls.push(`removeImage ${image}`);
        if (engine.hangRemovals) await new Promise(() => undefined);
        engine.images.delete(image);
      },
      async imageExists(image: string) {
        return engine.images.has(image);
      },
      async pullImage(reference: string) {
        engine.calls.push(`pull ${reference}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
        engine.images.add(reference);
      },
      async pushImage(image: string, name: string) {
        engine.calls.push(`push ${image} ${name}`);
        await engine.push(image);
        engine.images.add(`${PREFIX}/${name}`);
        return `${PREFIX}/${name}`;
      },
    } as unknown as SandboxRuntime;
  }
}

/** Source node `src` (holding the checkpoint) and two others, all ready; a registry unless `registry` is false. */
function setUp(registry = true) {
  const engines = { src: new FakeEngine(CHECKPOINT), b: new FakeEngine(), c: new FakeEngine() };
  const nodes = new NodeSet('src');
  for (const [nodeId, engine] of Object.entries(engines)) nodes.add({ nodeId, runtime: engine.asRuntime(), dial: () => Promise.reject(new Error('no dial')) });
  const images = new ClusterImages(registry ? { host: '127.0.0.1:1', prefix: PREFIX, insecure: true, nodeImages: [] } : undefined, logger);
  // The registry's tag removal (HTTP to the registry) is recorded, not made.
  const forget = vi.spyOn(images, 'forget').mockResolvedValue();
  const checkpoint = new ForkCheckpoint({ nodes, images, logger }, 'isource', 'src', CHECKPOINT, 'fork0123456789abcdef');
  return { engines, nodes, checkpoint, forget, node: (id: keyof typeof engines) => nodes.node(id) };
}

const pushes = (engine: FakeEngine): number => engine.calls.filter((c) => c.startsWith('push ')).length;

describe('fork checkpoint', () => {
  it("a fork on the source's node starts from the checkpoint there: no push, no pull", async () => {
    const { engines, checkpoint, forget, node } = setUp();
    expect(await checkpoint.claimOn(node('src'), 'ifork1')).toBe('tidepool/paused:ifork1');
    expect(engines.src.calls).toEqual([`claim ${CHECKPOINT} ifork1`]);
    await checkpoint.release('ifork1', 'src');
    await checkpoint.dispose();
    // The fork keeps its own image; the checkpoint goes; nothing was pushed, so nothing is removed from the registry.
    expect([...engines.src.images]).toEqual(['tidepool/paused:ifork1']);
    expect(forget).not.toHaveBeenCalled();
    expect(engines.b.calls).toEqual([]);
  });

  it('many forks placed on other nodes share one push from the source; each node pulls the pushed name; dispose removes every name the call made', async () => {
    const { engines, checkpoint, forget, node } = setUp();
    const forks = ['i1', 'i2', 'i3', 'i4', 'i5'];
    const targets = ['b', 'b', 'c', 'c', 'src'] as const;
    const claimed = await Promise.all(forks.map((id, i) => checkpoint.claimOn(node(targets[i]), id)));
    expect(claimed).toEqual(forks.map((id) => `tidepool/paused:${id}`));
    expect(pushes(engines.src)).toBe(1);
    expect(engines.src.calls).toContain(`push ${CHECKPOINT} fork:fork0123456789abcdef`);
    for (const engine of [engines.b, engines.c]) {
      expect(engine.calls.filter((c) => c.startsWith('pull ')).every((c) => c === `pull ${REFERENCE}`)).toBe(true);
      expect(engine.images.has(REFERENCE)).toBe(true);
    }
    // The source's node never pulls what it pushed.
    expect(engines.src.calls.some((c) => c.startsWith('pull '))).toBe(false);
    for (const [i, id] of forks.entries()) await checkpoint.release(id, targets[i]);
    await checkpoint.dispose();
    expect([...engines.src.images]).toEqual(['tidepool/paused:i5']);
    expect([...engines.b.images].sort()).toEqual(['tidepool/paused:i1', 'tidepool/paused:i2']);
    expect([...engines.c.images].sort()).toEqual(['tidepool/paused:i3', 'tidepool/paused:i4']);
    expect(forget).toHaveBeenCalledWith(REFERENCE);
  });

  it("a fork whose start failed on one node and succeeded on another keeps its image only where it runs; a failed fork's goes everywhere", async () => {
    const { engines, checkpoint, node } = setUp();
    await checkpoint.claimOn(node('b'), 'imoved');
    await checkpoint.claimOn(node('c'), 'imoved');
    await checkpoint.release('imoved', 'c');
    expect(engines.b.images.has('tidepool/paused:imoved')).toBe(false);
    expect(engines.c.images.has('tidepool/paused:imoved')).toBe(true);
    await checkpoint.claimOn(node('src'), 'ifailed');
    await checkpoint.claimOn(node('b'), 'ifailed');
    await checkpoint.release('ifailed');
    expect(engines.src.images.has('tidepool/paused:ifailed')).toBe(false);
    expect(engines.b.images.has('tidepool/paused:ifailed')).toBe(false);
    await checkpoint.dispose();
  });

  it('a failed push fails every fork placed elsewhere with the reason, is not retried, and leaves only the checkpoint to remove', async () => {
    const { engines, checkpoint, forget, node } = setUp();
    engines.src.push = () => Promise.reject(new Error('push 127.0.0.1:1/tp/fork:x: connection refused'));
    const results = await Promise.allSettled([checkpoint.claimOn(node('b'), 'i1'), checkpoint.claimOn(node('c'), 'i2'), checkpoint.claimOn(node('b'), 'i3')]);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      const error = (result as PromiseRejectedResult).reason as PlatformError;
      expect(error).toBeInstanceOf(PlatformError);
      expect(error.kind).toBe('internal');
      expect(error.message).toBe('Fork of sandbox "isource" failed: its checkpoint could not be pushed from node "src" to the registry (push 127.0.0.1:1/tp/fork:x: connection refused)');
    }
    expect(pushes(engines.src)).toBe(1);
    expect(engines.b.calls).toEqual([]);
    expect(engines.c.calls).toEqual([]);
    // A fork on the source's node still starts (it needs no push).
    expect(await checkpoint.claimOn(node('src'), 'i4')).toBe('tidepool/paused:i4');
    for (const id of ['i1', 'i2', 'i3']) await checkpoint.release(id);
    await checkpoint.release('i4', 'src');
    await checkpoint.dispose();
    expect([...engines.src.images]).toEqual(['tidepool/paused:i4']);
    expect(forget).not.toHaveBeenCalled();
  });

  it("the source's node lost during the push: the forks fail at once with that reason, and dispose does not wait for the lost node", async () => {
    const { engines, nodes, checkpoint, node } = setUp();
    engines.src.push = () => new Promise(() => undefined);
    engines.src.hangRemovals = true;
    const claim = checkpoint.claimOn(node('b'), 'i1');
    const settled = claim.then(() => 'claimed', (error: unknown) => (error as Error).message);
    await new Promise((resolve) => setTimeout(resolve, 50));
    nodes.setStatus('src', 'lost');
    expect(await settled).toBe('Fork of sandbox "isource" failed: its checkpoint could not be pushed from node "src" to the registry (node "src" was lost during the push)');
    await checkpoint.release('i1');
    await checkpoint.dispose();
    expect(engines.src.calls).toContain(`removeImage ${CHECKPOINT}`);
    expect(engines.b.calls).toEqual([]);
  });

  it('without a registry a fork cannot be brought to another node (the caller pins forks to the source then)', async () => {
    const { checkpoint, node } = setUp(false);
    await expect(checkpoint.claimOn(node('b'), 'i1')).rejects.toThrow(/no registry is configured/);
    expect(await checkpoint.claimOn(node('src'), 'i2')).toBe('tidepool/paused:i2');
    await checkpoint.dispose();
  });
});

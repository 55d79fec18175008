import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ReplicaChannel } from '../../store/sql.ts';
import { SANDBOX_CHANNEL, SandboxCacheSync } from './sandbox-cache-sync.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import type { SandboxStore } from './sandbox-store.ts';

const record = (id: string, state: 'running' | 'paused' = 'running'): SandboxRecord => ({ sandboxId: id, state }) as SandboxRecord;

/** A channel delivering notifications synchronously, and a store whose reads can be held back. */
function harness() {
  let handlers: { message(payload: string): void; connected(): void } | undefined;
  const rows = new Map<string, SandboxRecord>();
  const reads: string[][] = [];
  let gate: Promise<void> | undefined;
  const channel: ReplicaChannel = {
    withLock: (_key, work) => work(),
    async listen(name, h) {
      expect(name).toBe(SANDBOX_CHANNEL);
      handlers = h;
      h.connected();
      return { close: async () => undefined };
    },
    async notify(_name, payload) {
      queueMicrotask(() => handlers?.message(payload));
    },
  };
  const store = {
    async getMany(ids: string[]) {
      reads.push([...ids]);
      const snapshot = ids.flatMap((id) => (rows.has(id) ? [rows.get(id)!] : []));
      await gate;
      return snapshot;
    },
    async all() {
      const snapshot = [...rows.values()];
      await gate;
      return snapshot;
    },
  } as unknown as SandboxStore;
  const cache = new Map<string, SandboxRecord>();
  const sync = new SandboxCacheSync({
    channel,
    store,
    apply: (id, r) => (r ? cache.set(id, r) : cache.delete(id)),
    held: () => cache.keys(),
    logger: pino({ level: 'silent' }),
  });
  return {
    sync,
    rows,
    reads,
    cache,
    hold: () => {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      return () => {
        gate = undefined;
        open();
      };
    },
    notify: (id: string) => handlers!.message(id),
    reconnect: () => handlers!.connected(),
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

describe('SandboxCacheSync', () => {
  it('fills the cache at start, then follows notified changes and removals', async () => {
    const h = harness();
    h.rows.set('a', record('a'));
    await h.sync.start();
    expect([...h.cache.keys()]).toEqual(['a']);
    h.rows.set('b', record('b'));
    h.rows.set('a', record('a', 'paused'));
    h.notify('b');
    h.notify('a');
    await settle();
    expect(h.cache.get('a')?.state).toBe('paused');
    expect(h.cache.has('b')).toBe(true);
    h.rows.delete('a');
    h.notify('a');
    await settle();
    expect(h.cache.has('a')).toBe(false);
    await h.sync.stop();
  });

  it('reads an id changed while its read was in flight again (the last read starts after the last change)', async () => {
    const h = harness();
    await h.sync.start();
    h.rows.set('a', record('a'));
    const open = h.hold();
    h.notify('a');
    await settle();
    h.rows.set('a', record('a', 'paused'));
    h.notify('a');
    open();
    await settle();
    expect(h.reads.filter((ids) => ids.includes('a'))).toHaveLength(2);
    expect(h.cache.get('a')?.state).toBe('paused');
    await h.sync.stop();
  });

  it('a catch-up does not overwrite what a change notified during it brought in', async () => {
    const h = harness();
    h.rows.set('a', record('a'));
    await h.sync.start();
    const open = h.hold();
    h.reconnect(); // catch-up reads every row (held back)
    await settle();
    h.rows.set('a', record('a', 'paused'));
    h.notify('a');
    open();
    await settle();
    await settle();
    expect(h.cache.get('a')?.state).toBe('paused');
    await h.sync.stop();
  });

  it('caughtUp resolves after changes notified before it are in the cache; ignores foreign markers and junk', async () => {
    const h = harness();
    await h.sync.start();
    h.rows.set('a', record('a'));
    const open = h.hold();
    h.notify('a');
    h.notify('caught-up:someone-else:1');
    h.notify('');
    h.notify('x'.repeat(101));
    let done = false;
    const waiting = h.sync.caughtUp().then(() => (done = true));
    await settle();
    expect(done).toBe(false);
    open();
    await waiting;
    expect(h.cache.has('a')).toBe(true);
    expect(h.reads.flat()).toEqual(['a']);
    await h.sync.stop();
  });

  it('a catch-up drops ids the store no longer has, after reading them once more', async () => {
    const h = harness();
    h.rows.set('a', record('a'));
    h.rows.set('b', record('b'));
    await h.sync.start();
    h.rows.delete('b'); // its notification was lost (disconnected)
    await h.sync.resync();
    expect([...h.cache.keys()]).toEqual(['a']);
    expect(h.reads.flat()).toContain('b');
    await h.sync.stop();
  });
});

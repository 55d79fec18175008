import type Docker from 'dockerode';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.ts';
import { ContainerHardening, containerHardening, DEFAULT_HARDENING } from './container-hardening.ts';

function engine(info: Record<string, unknown>, create?: () => Promise<unknown>): Docker {
  return { info: async () => info, createContainer: create ?? (async () => ({ remove: async () => undefined })) } as unknown as Docker;
}

function capture(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  return { logger, lines };
}

describe('ContainerHardening', () => {
  it('refuses an unregistered runtime at startup with what to do', async () => {
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'runsc', diskMB: 0 });
    await expect(hardening.prepare(engine({ Runtimes: { runc: {} } }), capture().logger, undefined)).rejects.toThrow(
      /TIDEPOOL_CONTAINER_RUNTIME is 'runsc' but the Docker engine knows only the runtimes runc\. Install gVisor \(Debian: apt-get install runsc\)/,
    );
    await new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'runsc', diskMB: 0 }).prepare(engine({ Runtimes: { runc: {}, runsc: {} } }), capture().logger, undefined);
  });

  it('selects a registered runtime for every container', async () => {
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'runsc', diskMB: 0 });
    await hardening.prepare(engine({ Runtimes: { runc: {}, runsc: {} } }), capture().logger, undefined);
    expect(hardening.hostConfig(512 * 1024 * 1024)).toMatchObject({ Runtime: 'runsc', Memory: 512 * 1024 * 1024, MemorySwap: 512 * 1024 * 1024, CapDrop: ['ALL'] });
  });

  it('auto (the default) picks crun when the engine has it registered, else the engine default, and says which in one line', async () => {
    const withCrun = capture();
    expect(DEFAULT_HARDENING.runtime).toBe('auto');
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'auto', diskMB: 0 });
    await hardening.prepare(engine({ Runtimes: { runc: {}, crun: {} } }), withCrun.logger, undefined);
    expect(hardening.runtime).toBe('crun');
    expect(hardening.hostKernel).toBe(true);
    expect(hardening.hostConfig(1)).toMatchObject({ Runtime: 'crun' });
    expect(withCrun.lines.join('')).toMatch(/sandboxes run with crun/);

    const without = capture();
    const fallback = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'auto', diskMB: 0 });
    await fallback.prepare(engine({ Runtimes: { runc: {} } }), without.logger, undefined);
    expect(fallback.runtime).toBe('');
    expect(fallback.hostKernel).toBe(true);
    expect(fallback.hostConfig(1)).not.toHaveProperty('Runtime');
    expect(without.lines).toHaveLength(1);
    expect(without.lines[0]).toMatch(/engine's default runtime: it has no crun registered/);
  });

  it('auto falls back to the engine default when crun cannot start a container here; a named crun fails startup', async () => {
    const hybrid = 'OCI runtime create failed: cgroups in hybrid mode not supported, drop all controllers from cgroupv2';
    const created: Record<string, unknown>[] = [];
    let removed = 0;
    const refusing = (async (spec: Record<string, unknown>) => {
      created.push(spec);
      return { start: async () => Promise.reject(new Error(hybrid)), remove: async () => void (removed += 1) };
    }) as () => Promise<unknown>;
    const { logger, lines } = capture();
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'auto', diskMB: 0 });
    await hardening.prepare(engine({ Runtimes: { runc: {}, crun: {} } }, refusing), logger, 'base');
    expect(hardening.runtime).toBe('');
    expect(hardening.hostConfig(1)).not.toHaveProperty('Runtime');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/crun is registered but cannot start a container here/);
    expect(lines[0]).toMatch(/hybrid mode not supported/);
    // The probe ran with the sandboxes' limits, under crun, without a network, and was removed.
    expect(created[0]).toMatchObject({ Image: 'base', HostConfig: { Runtime: 'crun', NetworkMode: 'none', PidsLimit: DEFAULT_HARDENING.pidsLimit, CapDrop: ['ALL'] } });
    expect(removed).toBe(1);

    await expect(new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'crun', diskMB: 0 }).prepare(engine({ Runtimes: { runc: {}, crun: {} } }, refusing), capture().logger, 'base')).rejects.toThrow(
      /TIDEPOOL_CONTAINER_RUNTIME is 'crun' but crun cannot start a container here \(.*hybrid mode/,
    );

    const starting = (async () => ({ start: async () => undefined, remove: async () => undefined })) as () => Promise<unknown>;
    const working = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'auto', diskMB: 0 });
    await working.prepare(engine({ Runtimes: { runc: {}, crun: {} } }, starting), capture().logger, 'base');
    expect(working.runtime).toBe('crun');
  });

  it('tells how to get crun when it is asked for by name and missing', async () => {
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: 'crun', diskMB: 0 });
    await expect(hardening.prepare(engine({ Runtimes: { runc: {} } }), capture().logger, undefined)).rejects.toThrow(
      /TIDEPOOL_CONTAINER_RUNTIME is 'crun' .* apt-get install crun\) and run scripts\/ensure-docker.sh as root/,
    );
  });

  it('treats runc and crun as host-kernel runtimes, gVisor not', async () => {
    for (const [runtime, hostKernel] of [['runc', true], ['crun', true], ['runsc', false]] as const) {
      const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime, diskMB: 0 });
      await hardening.prepare(engine({ Runtimes: { runc: {}, crun: {}, runsc: {} } }), capture().logger, undefined);
      expect(hardening.hostKernel).toBe(hostKernel);
      expect(hardening.hostConfig(1)).toMatchObject({ Runtime: runtime });
    }
  });

  it('notes once at startup that the disk quota is not enforced where the driver cannot, and sets none', async () => {
    const { logger, lines } = capture();
    const hardening = new ContainerHardening(DEFAULT_HARDENING);
    await hardening.prepare(engine({ Runtimes: { runc: {} }, Driver: 'overlay2', DriverStatus: [['Backing Filesystem', 'extfs']] }), logger, 'base');
    expect(lines.join('')).toMatch(/disk quota .* is not enforced: the storage driver is overlay2 on extfs; per-container quotas need overlay2 on xfs mounted with pquota/);
    expect(hardening.diskQuotaEnforced).toBe(false);
    expect(hardening.hostConfig(1)).not.toHaveProperty('StorageOpt');
  });

  it('on xfs, applies the quota only when the engine accepts a per-container size (pquota)', async () => {
    const xfs = { Runtimes: { runc: {} }, Driver: 'overlay2', DriverStatus: [['Backing Filesystem', 'xfs']] };
    const withPquota = new ContainerHardening(DEFAULT_HARDENING);
    await withPquota.prepare(engine(xfs), capture().logger, 'base');
    expect(withPquota.hostConfig(1)).toMatchObject({ StorageOpt: { size: `${DEFAULT_HARDENING.diskMB}M` } });
    const { logger, lines } = capture();
    const without = new ContainerHardening(DEFAULT_HARDENING);
    await without.prepare(engine(xfs, async () => Promise.reject(new Error('--storage-opt is supported only for overlay over xfs with pquota'))), logger, 'base');
    expect(without.diskQuotaEnforced).toBe(false);
    expect(lines.join('')).toMatch(/pquota/);
  });
});

describe('hardening settings', () => {
  it('come from TIDEPOOL_* variables with defaults, validated', () => {
    expect(containerHardening(loadConfig({})).settings).toEqual(DEFAULT_HARDENING);
    const custom = loadConfig({ TIDEPOOL_SANDBOX_PIDS_LIMIT: '256', TIDEPOOL_SANDBOX_NOFILE: '4096', TIDEPOOL_SANDBOX_NPROC: '8192', TIDEPOOL_SANDBOX_DISK_MB: '0', TIDEPOOL_CONTAINER_RUNTIME: 'runsc' });
    expect(containerHardening(custom).settings).toEqual({ pidsLimit: 256, nofile: 4096, nproc: 8192, diskMB: 0, runtime: 'runsc' });
    expect(() => loadConfig({ TIDEPOOL_SANDBOX_PIDS_LIMIT: '5' })).toThrow(/TIDEPOOL_SANDBOX_PIDS_LIMIT/);
    expect(() => loadConfig({ TIDEPOOL_CONTAINER_RUNTIME: 'run sc' })).toThrow(/TIDEPOOL_CONTAINER_RUNTIME/);
    expect(loadConfig({}).containerRuntime).toBe('auto');
    expect(loadConfig({ TIDEPOOL_CONTAINER_RUNTIME: ' ' }).containerRuntime).toBe('');
    expect(loadConfig({ TIDEPOOL_CONTAINER_RUNTIME: 'runc' }).containerRuntime).toBe('runc');
  });
});

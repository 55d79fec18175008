import { EventEmitter } from 'node:events';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { GateConfigError, loadGateConfig } from './gate-config.ts';
import { guardProcess } from './process-guard.ts';

describe('loadGateConfig', () => {
  it('has safe defaults: loopback, the usual engine socket, no bind roots', () => {
    expect(loadGateConfig({})).toMatchObject({
      listen: { host: '127.0.0.1', port: 2375 },
      engineSocket: '/var/run/docker.sock',
      bindRoots: [],
      helperImage: 'tidepool/base:latest',
      runtimes: ['runc', 'crun', 'runsc'],
      logLevel: 'info',
    });
  });

  it('reads tcp and unix addresses and bind roots', () => {
    const config = loadGateConfig({ DOCKER_GATE_LISTEN: 'unix:///run/gate/docker.sock', DOCKER_GATE_ALLOWED_BIND_ROOTS: '/srv/volumes/, /data/v', DOCKER_GATE_ENGINE: 'unix:///run/docker.sock' });
    expect(config.listen).toEqual({ socketPath: '/run/gate/docker.sock' });
    expect(config.engineSocket).toBe('/run/docker.sock');
    expect(config.bindRoots).toEqual(expect.arrayContaining(['/srv/volumes', '/data/v']));
    expect(loadGateConfig({ DOCKER_GATE_LISTEN: 'tcp://0.0.0.0:2375' }).listen).toEqual({ host: '0.0.0.0', port: 2375 });
  });

  it('reads the stack images no call may write to', () => {
    expect(loadGateConfig({}).protectedImages).toEqual([]);
    const config = loadGateConfig({ DOCKER_GATE_PROTECTED_IMAGES: 'tidepool-compose/setup:latest, tidepool-compose/docker-gate:latest,,tidepool-compose/api' });
    expect(config.protectedImages).toEqual(['tidepool-compose/setup:latest', 'tidepool-compose/docker-gate:latest', 'tidepool-compose/api']);
    expect(() => loadGateConfig({ DOCKER_GATE_PROTECTED_IMAGES: 'tidepool/setup latest' })).toThrow(/DOCKER_GATE_PROTECTED_IMAGES/);
    expect(() => loadGateConfig({ DOCKER_GATE_PROTECTED_IMAGES: 'Tidepool/Setup' })).toThrow(/DOCKER_GATE_PROTECTED_IMAGES/);
  });

  it('reads the repositories image names may be written in (the platform\'s own by default)', () => {
    expect(loadGateConfig({}).imageRepositories).toEqual(['tidepool/paused', 'tidepool/snapshot', 'tidepool/layer', 'tidepool/template']);
    expect(loadGateConfig({ DOCKER_GATE_IMAGE_REPOSITORIES: 'tidepool/template, registry.example:5000/tidepool/*' }).imageRepositories).toEqual(['tidepool/template', 'registry.example:5000/tidepool/*']);
    expect(loadGateConfig({ DOCKER_GATE_IMAGE_REPOSITORIES: '' }).imageRepositories).toEqual([]);
    for (const bad of ['*', 'tidepool/template:latest', 'Tidepool/x', 'a b', 'tidepool/*/x']) {
      expect(() => loadGateConfig({ DOCKER_GATE_IMAGE_REPOSITORIES: bad }), bad).toThrow(/DOCKER_GATE_IMAGE_REPOSITORIES/);
    }
  });

  it('reads the networks not made by the platform that its containers may join (none by default)', () => {
    expect(loadGateConfig({}).networks).toEqual([]);
    expect(loadGateConfig({ DOCKER_GATE_NETWORKS: 'tidepool-compose-sandboxes, other_net' }).networks).toEqual(['tidepool-compose-sandboxes', 'other_net']);
    for (const bad of ['bridge', 'host', 'a b', '-x']) expect(() => loadGateConfig({ DOCKER_GATE_NETWORKS: bad }), bad).toThrow(/DOCKER_GATE_NETWORKS/);
  });

  it('names the variable of a bad value', () => {
    expect(() => loadGateConfig({ DOCKER_GATE_LISTEN: 'http://x' })).toThrow(/DOCKER_GATE_LISTEN/);
    expect(() => loadGateConfig({ DOCKER_GATE_LISTEN: 'tcp://x:99999' })).toThrow(GateConfigError);
    expect(() => loadGateConfig({ DOCKER_GATE_ALLOWED_BIND_ROOTS: '/' })).toThrow(/DOCKER_GATE_ALLOWED_BIND_ROOTS/);
    expect(() => loadGateConfig({ DOCKER_GATE_ALLOWED_BIND_ROOTS: 'relative/dir' })).toThrow(/DOCKER_GATE_ALLOWED_BIND_ROOTS/);
    expect(() => loadGateConfig({ DOCKER_GATE_ENGINE: 'tcp://engine:2375' })).toThrow(/DOCKER_GATE_ENGINE/);
    expect(() => loadGateConfig({ DOCKER_GATE_LOG_LEVEL: 'loud' })).toThrow(/DOCKER_GATE_LOG_LEVEL/);
    expect(() => loadGateConfig({ DOCKER_GATE_ALLOWED_RUNTIMES: 'runc,bad name' })).toThrow(/DOCKER_GATE_ALLOWED_RUNTIMES/);
  });
});

describe('guardProcess', () => {
  it('logs uncaught errors and rejections instead of ending the process', () => {
    const emitter = new EventEmitter();
    const target = emitter as unknown as NodeJS.Process;
    const lines: string[] = [];
    const unguard = guardProcess(pino({}, { write: (line: string) => void lines.push(line) }), target);
    emitter.emit('uncaughtException', new Error('boom'), 'uncaughtException');
    emitter.emit('unhandledRejection', new Error('later'));
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(['uncaught exception in the docker gate (kept running)', 'unhandled rejection in the docker gate (kept running)']);
    unguard();
    expect(emitter.listenerCount('uncaughtException')).toBe(0);
  });
});

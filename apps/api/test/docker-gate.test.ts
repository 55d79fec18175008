/**
 * The docker gate (apps/docker-gate) in front of the real engine: the platform started with
 * TIDEPOOL_DOCKER_HOST pointing at the gate runs sandboxes through it (create, commands, files, pause/resume,
 * kill, a snapshot, a template build, the events it follows), the firewall helper container works through it
 * in its exact shape, exec with HTTP Upgrade is tunnelled into platform containers, and calls the platform
 * never makes are refused with 403 {message} while the engine is left as it was.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template } from 'e2b';
import Docker from 'dockerode';
import pino from 'pino';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGate, type RunningGate } from '../../docker-gate/src/gate-server.ts';
import { DEFAULT_IMAGE_REPOSITORIES } from '../../docker-gate/src/image-repositories.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { EngineFirewallCommands, FIREWALL_PROGRAMS } from '../src/runtime/docker/firewall-commands.ts';
import { SandboxFirewall } from '../src/runtime/docker/sandbox-firewall.ts';
import { networkSpec } from '../src/runtime/docker/sandbox-network.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { removeTemplatesAndSandboxes } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const exec = promisify(execFile);
const MARK = 'dev.tidepool-test.docker-gate';
const engine = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'docker-gate-'));
const socketPath = join(dir, 'gate.sock');
/** The gate's only allowed bind root in this suite (like the volumes directory in docker-compose.yml). */
const volumesRoot = join(dir, 'volumes');
/** A volume directory under that root as the platform names it (vol_ and 20 of [a-z0-9]). */
const volumeDir = (seed: string): string => join(volumesRoot, `vol_${`${seed}${'0'.repeat(20)}`.slice(0, 20)}`);
/** Every call the gate forwarded or refused (the gate logs at debug). */
const gateLog: { msg: string; call?: string; method?: string; url?: string; reason?: string; status?: number }[] = [];

/** An image of the stack other than the helper's (compose's `setup` and `docker-gate` images mount the engine socket). */
const stackImage = `gate-test-${run}-setup:latest`;
const gateSettings = {
  listen: { socketPath },
  engineSocket: '/var/run/docker.sock',
  bindRoots: [volumesRoot],
  helperImage: 'tidepool/base:latest',
  protectedImages: [stackImage],
  imageRepositories: [...DEFAULT_IMAGE_REPOSITORIES],
  networks: [] as string[],
  runtimes: ['runc', 'crun', 'runsc'],
  logLevel: 'debug',
};

let gate: RunningGate;
let platform: TestPlatform;
let outsider: Docker.Container;

/** A raw request to the gate's socket (or another gate's): status and parsed JSON body. */
function gateCall(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, via = socketPath): Promise<{ status: number; body: any }> {
  const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      { socketPath: via, method, path, headers: { ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}), ...headers } },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            // not JSON
          }
          resolve({ status: response.statusCode ?? 0, body: parsed });
        });
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

async function containersMarked(): Promise<string[]> {
  return (await engine.listContainers({ all: true, filters: { label: [`${MARK}=${run}`] } })).map((c) => c.Id);
}

const platformLabels = { 'dev.tidepool.platform-id': `gate-test-${run}`, [MARK]: run };

beforeAll(async () => {
  const logger = pino({ level: 'debug' }, { write: (line: string) => void gateLog.push(JSON.parse(line)) });
  gate = await startGate(gateSettings, logger);
  // As compose runs it (docker-compose.yml): the gate binds only volume directories, so no boot id files.
  platform = await startTestPlatform({ dockerHost: gate.dockerHost, sandboxBootIds: false });

  // A container the platform did not make, created straight on the engine.
  outsider = await engine.createContainer({ Image: 'tidepool/base:latest', Entrypoint: ['/bin/sleep', '600'], Cmd: [], Labels: { [MARK]: run }, name: `gate-outsider-${run}` });
  await outsider.start();
  // An image of its own under a stack name (removing it by id in a test touches nothing shared).
  const [repo, tag] = stackImage.split(':');
  await outsider.commit({ repo, tag, changes: [`LABEL ${MARK}=${run}`] });
}, 600_000);

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform).catch(() => undefined);
  await platform?.dispose();
  await outsider?.remove({ force: true }).catch(() => undefined);
  for (const id of await containersMarked()) await engine.getContainer(id).remove({ force: true }).catch(() => undefined);
  await gate?.close();
  await engine.getImage(stackImage).remove().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
}, 300_000);

describe('the platform through the gate', () => {
  it('creates, runs commands, moves files, pauses, resumes and kills a sandbox with the e2b SDK', { timeout: 300_000 }, async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
    try {
      expect((await sbx.commands.run('whoami')).stdout.trim()).toBe('user');
      await sbx.files.write('/home/user/gate.txt', `through the gate ${run}`);
      expect(await sbx.files.read('/home/user/gate.txt')).toBe(`through the gate ${run}`);
      expect((await sbx.commands.run('cat /home/user/gate.txt')).stdout).toBe(`through the gate ${run}`);
      await sbx.pause();
      expect(await sbx.isRunning()).toBe(false);
      const resumed = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, timeoutMs: 120_000 });
      expect(await resumed.files.read('/home/user/gate.txt')).toBe(`through the gate ${run}`);
      expect((await resumed.commands.run('echo resumed')).stdout.trim()).toBe('resumed');
      const snapshot = await resumed.createSnapshot();
      const fromSnapshot = await Sandbox.create(snapshot.snapshotId, { ...platform.sdk, timeoutMs: 120_000 });
      expect(await fromSnapshot.files.read('/home/user/gate.txt')).toBe(`through the gate ${run}`);
      await fromSnapshot.kill();
      await resumed.kill();
      expect(await Sandbox.list({ ...platform.sdk }).nextItems()).toHaveLength(0);
    } finally {
      await sbx.kill().catch(() => undefined);
    }
    const calls = new Set(gateLog.filter((l) => l.msg.startsWith('forwarded')).map((l) => l.call));
    for (const call of ['ping', 'info', 'events', 'container create', 'archive put', 'container start', 'container inspect', 'container pause', 'container remove', 'commit']) {
      expect(calls, call).toContain(call);
    }
    expect(gateLog.filter((l) => l.msg === 'call refused')).toEqual([]);
  });

  it('builds a template (build containers, archives, commits) through the gate', { timeout: 600_000 }, async () => {
    const template = Template().fromBaseImage().runCmd(`echo built-${run} > /home/user/built.txt`);
    await Template.build(template, `gate-build-${run}`, { ...platform.sdk });
    const sbx = await Sandbox.create(`gate-build-${run}`, { ...platform.sdk, timeoutMs: 120_000 });
    try {
      expect((await sbx.commands.run('cat /home/user/built.txt')).stdout.trim()).toBe(`built-${run}`);
    } finally {
      await sbx.kill();
    }
    expect(gateLog.filter((l) => l.msg === 'call refused')).toEqual([]);
  });

  it('runs the firewall helper container in the shape the platform makes it', { timeout: 120_000 }, async () => {
    const helper = new EngineFirewallCommands(new Docker({ socketPath }), 'tidepool/base:latest');
    expect(await helper.iptables(['-S', 'DOCKER-USER'])).toMatch(/^-N DOCKER-USER|^-P|DOCKER-USER/m);
    expect(await helper.hostFile('/etc/resolv.conf')).toMatch(/nameserver|^$/);
    expect(await helper.hostFile('/etc/shadow')).toBe(''); // refused by the gate: hostFile turns failures into ''
    // Host-root iptables only in the platform's vocabulary: no --modprobe, no flush or policy of built-in chains, no DNAT.
    const inputBefore = (await helper.iptables(['-S', 'INPUT'])).length;
    await expect(helper.iptables([`--modprobe=/bin/touch ${dir}/modprobed`, '-S'])).rejects.toThrow(/firewall helper refused: iptables/);
    await expect(helper.iptables(['-P', 'INPUT', 'ACCEPT'])).rejects.toThrow(/firewall helper refused/);
    await expect(helper.iptables(['-F', 'INPUT'])).rejects.toThrow(/firewall helper refused/);
    await expect(helper.restore('*nat\n-A PREROUTING -p tcp --dport 22 -j DNAT --to-destination 198.18.0.1:22\nCOMMIT\n')).rejects.toThrow(/firewall helper refused: iptables-restore/);
    await expect(helper.restore('*filter\nCOMMIT\n*filter\n-F INPUT\nCOMMIT\n')).rejects.toThrow(/firewall helper refused: iptables-restore/);
    expect((await helper.iptables(['-S', 'INPUT'])).length).toBe(inputBefore);
    expect(gateLog.some((l) => l.msg === 'call refused' && /firewall helper refused/.test(l.reason ?? ''))).toBe(true);
  });

  it('installs, moves and removes real sandbox firewall rules through the helper, as the platform in compose does', { timeout: 300_000 }, async () => {
    const viaGate = new Docker({ socketPath });
    const name = `gate-fw-${run}`;
    await viaGate.createNetwork(networkSpec(name));
    const info = await engine.getNetwork(name).inspect();
    const short = info.Id.slice(0, 12);
    const bridge = `br-${short}`;
    const commands = new EngineFirewallCommands(viaGate, 'tidepool/base:latest');
    const firewall = new SandboxFirewall({ commands, logger: pino({ level: 'silent' }), network: { name, id: info.Id, bridge }, resolvers: ['198.18.0.53'] });
    const refusedBefore = gateLog.filter((l) => l.msg === 'call refused').length;
    const tagged = async (table: string, chain: string) =>
      (await exec('iptables', ['-w', '-t', table, '-S', chain])).stdout.split('\n').filter((l) => l.includes(`tidepool-isolation/${name}`));
    // A hook left by an older network of that name (gone: the gate would not hook its bridge now), made on the host.
    const staleShort = randomBytes(6).toString('hex');
    try {
      await exec('iptables', ['-w', '-N', `TP-FWD-${staleShort}`]);
      await exec('iptables', ['-w', '-I', 'DOCKER-USER', '1', '-i', `br-${staleShort}`, '-m', 'comment', '--comment', `tidepool-isolation/${name}`, '-j', `TP-FWD-${staleShort}`]);
      // It is deleted with the arguments real iptables printed (-D through the gate).
      await firewall.install();
      expect(await tagged('filter', 'DOCKER-USER')).toEqual([`-A DOCKER-USER -i ${bridge} -m comment --comment "tidepool-isolation/${name}" -j TP-FWD-${short}`]);
      expect(await tagged('filter', 'INPUT')).toHaveLength(1);
      expect(await tagged('nat', 'PREROUTING')).toHaveLength(1);
      firewall.setRedirect({ http: 40001, tls: 40002 });
      await firewall.applySandbox('isbxgate1', '198.18.0.77', { allow: ['198.18.1.0/24'], deny: ['0.0.0.0/0'], domains: ['example.com'] });
      // Moved: the dispatch lines real iptables printed (quoted comments) are deleted in the restore payload.
      await firewall.applySandbox('isbxgate1', '198.18.0.78', { allow: [], deny: ['198.18.2.0/24'] });
      const dispatch = (await exec('iptables', ['-w', '-S', `TP-SBX-${short}`])).stdout;
      expect(dispatch).toContain('-s 198.18.0.78/32');
      expect(dispatch).not.toContain('198.18.0.77');
      expect(await firewall.sandboxesWithRules()).toEqual(['isbxgate1']);
      await firewall.removeSandbox('isbxgate1');
      expect(await firewall.sandboxesWithRules()).toEqual([]);
      expect(gateLog.filter((l) => l.msg === 'call refused').slice(refusedBefore).map((l) => `${l.method} ${l.url}: ${l.reason}`)).toEqual([]);
      expect(gateLog.filter((l) => l.msg === 'call refused').length).toBe(refusedBefore);
    } finally {
      for (const [table, chain] of [['filter', 'DOCKER-USER'], ['filter', 'INPUT'], ['nat', 'PREROUTING']] as const) {
        for (const line of await tagged(table, chain).catch(() => [])) {
          await exec('iptables', ['-w', '-t', table, '-D', ...line.replace(/"/g, '').split(' ').slice(1)]).catch(() => undefined);
        }
      }
      for (const [table, chain] of [['filter', `TP-FWD-${short}`], ['filter', `TP-IN-${short}`], ['filter', `TP-SBX-${short}`], ['nat', `TP-NAT-${short}`], ['filter', `TP-FWD-${staleShort}`]]) {
        await exec('iptables', ['-w', '-t', table!, '-F', chain!]).catch(() => undefined);
        await exec('iptables', ['-w', '-t', table!, '-X', chain!]).catch(() => undefined);
      }
      await engine.getNetwork(name).remove().catch(() => undefined);
    }
  });

  it('installs, moves and removes real ip6tables rules through the helper (an IPv6 sandbox network); hostile ip6tables is refused', { timeout: 300_000 }, async () => {
    const viaGate = new Docker({ socketPath });
    const name = `gate-fw6-${run}`;
    // The test makes the IPv6 network itself (the platform never creates one).
    await engine.createNetwork({ ...networkSpec(name), EnableIPv6: true, IPAM: { Config: [{ Subnet: `fd00:7d:${randomBytes(2).toString('hex').replace(/^0+/, '') || '1'}::/64` }] } });
    const info = await engine.getNetwork(name).inspect();
    const short = info.Id.slice(0, 12);
    const bridge = `br-${short}`;
    const commands = new EngineFirewallCommands(viaGate, 'tidepool/base:latest', FIREWALL_PROGRAMS.ipv6);
    const firewall = new SandboxFirewall({ commands, family: 'ipv6', logger: pino({ level: 'silent' }), network: { name, id: info.Id, bridge }, resolvers: ['2001:db8::53', '198.18.0.53'] });
    const refusedBefore = gateLog.filter((l) => l.msg === 'call refused').length;
    const ip6 = async (...args: string[]) => (await exec('ip6tables', ['-w', ...args])).stdout;
    const forwardHook = async () => ((await ip6('-S', 'DOCKER-USER').catch(() => '')) + (await ip6('-S', 'FORWARD'))).split('\n').filter((l) => l.includes(`tidepool-isolation/${name}`));
    try {
      await firewall.install();
      await firewall.install(); // idempotent: still one hook
      expect(await forwardHook()).toHaveLength(1);
      expect((await ip6('-S', 'INPUT')).split('\n').filter((l) => l.includes(`tidepool-isolation/${name}`))).toHaveLength(1);
      expect(await ip6('-S', `TP-FWD-${short}`)).toContain('-d 2001:db8::53/128 -p udp -m udp --dport 53 -j RETURN');
      await firewall.applySandbox('isbxgate6', 'fd00:7d:1::77', { allow: ['2001:2::/48'], deny: ['0.0.0.0/0'] });
      await firewall.applySandbox('isbxgate6', 'fd00:7d:1::78', { allow: [], deny: ['2001:2::/48'] });
      const dispatch = await ip6('-S', `TP-SBX-${short}`);
      expect(dispatch).toContain('-s fd00:7d:1::78/128');
      expect(dispatch).not.toContain('fd00:7d:1::77');
      expect(await firewall.sandboxesWithRules()).toEqual(['isbxgate6']);
      await firewall.removeSandbox('isbxgate6');
      expect(await firewall.sandboxesWithRules()).toEqual([]);
      expect(gateLog.filter((l) => l.msg === 'call refused').slice(refusedBefore).map((l) => `${l.method} ${l.url}: ${l.reason}`)).toEqual([]);
      // Host-root ip6tables stays in the vocabulary: the engine's rules are unchanged by what is refused.
      const forwardBefore = await ip6('-S', 'FORWARD');
      await expect(commands.iptables([`--modprobe=/bin/touch ${dir}/modprobed6`, '-S'])).rejects.toThrow(/firewall helper refused: ip6tables/);
      await expect(commands.iptables(['-P', 'FORWARD', 'DROP'])).rejects.toThrow(/firewall helper refused: ip6tables/);
      await expect(commands.iptables(['-I', 'FORWARD', '1', '-j', 'ACCEPT'])).rejects.toThrow(/firewall helper refused: ip6tables/);
      await expect(commands.restore('*nat\nCOMMIT\n')).rejects.toThrow(/firewall helper refused: ip6tables-restore/);
      await expect(commands.restore('*filter\n-A FORWARD -j ACCEPT\nCOMMIT\n')).rejects.toThrow(/firewall helper refused: ip6tables-restore/);
      expect(await ip6('-S', 'FORWARD')).toBe(forwardBefore);
      expect(existsSync(join(dir, 'modprobed6'))).toBe(false);
    } finally {
      for (const builtin of ['DOCKER-USER', 'FORWARD', 'INPUT']) {
        const lines = (await ip6('-S', builtin).catch(() => '')).split('\n').filter((l) => l.includes(`tidepool-isolation/${name}`));
        for (const line of lines) await exec('ip6tables', ['-w', '-D', ...line.replace(/"/g, '').split(' ').slice(1)]).catch(() => undefined);
      }
      for (const chain of [`TP-FWD-${short}`, `TP-IN-${short}`, `TP-SBX-${short}`]) {
        await exec('ip6tables', ['-w', '-F', chain]).catch(() => undefined);
        await exec('ip6tables', ['-w', '-X', chain]).catch(() => undefined);
      }
      await engine.getNetwork(name).remove().catch(() => undefined);
    }
  });

  it('hooks only the platform\'s networks into the host\'s chains, and lists no whole table', { timeout: 120_000 }, async () => {
    const viaGate = new Docker({ socketPath });
    // A network the platform did not make (compose's `gate` network, another project's), straight on the engine.
    const other = `gate-fw-other-${run}`;
    await engine.createNetwork({ Name: other, Driver: 'bridge', Labels: { [MARK]: run } });
    const otherShort = (await engine.getNetwork(other).inspect()).Id.slice(0, 12);
    const commands = new EngineFirewallCommands(viaGate, 'tidepool/base:latest');
    const hooks = async () => (await exec('iptables', ['-w', '-S', 'DOCKER-USER'])).stdout.split('\n').filter((l) => l.includes(`br-${otherShort}`));
    try {
      await commands.iptables(['-t', 'filter', '-N', `TP-FWD-${otherShort}`]);
      const hook = ['-i', `br-${otherShort}`, '-m', 'comment', '--comment', `tidepool-isolation/${other}`, '-j', `TP-FWD-${otherShort}`];
      await expect(commands.iptables(['-t', 'filter', '-I', 'DOCKER-USER', '1', ...hook])).rejects.toThrow(/not a Tidepool platform network/);
      await expect(commands.iptables(['-t', 'nat', '-I', 'PREROUTING', '1', ...hook.slice(0, -1), `TP-NAT-${otherShort}`])).rejects.toThrow(/not a Tidepool platform network/);
      expect(await hooks()).toEqual([]);
      await expect(commands.iptables(['-S'])).rejects.toThrow(/lists only a named chain/);
      await expect(commands.iptables(['-t', 'nat', '-S'])).rejects.toThrow(/lists only a named chain/);
    } finally {
      await exec('iptables', ['-w', '-X', `TP-FWD-${otherShort}`]).catch(() => undefined);
      await engine.getNetwork(other).remove().catch(() => undefined);
    }
  });

  it('tunnels exec with HTTP Upgrade into platform containers', { timeout: 120_000 }, async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      const viaGate = new Docker({ socketPath });
      const [container] = await viaGate.listContainers({ filters: { label: [`dev.tidepool.sandbox-id=${sbx.sandboxId}`] } });
      const exec = await viaGate.getContainer(container!.Id).exec({ Cmd: ['echo', `exec-${run}`], AttachStdout: true, AttachStderr: true });
      const stream = await exec.start({ hijack: true, stdin: false });
      const chunks: Buffer[] = [];
      await new Promise<void>((resolve, reject) => {
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', reject);
      });
      expect(Buffer.concat(chunks).toString()).toContain(`exec-${run}`);
      expect((await exec.inspect()).ExitCode).toBe(0);
      const privileged = await gateCall('POST', `/containers/${container!.Id}/exec`, { Cmd: ['id'], Privileged: true });
      expect(privileged.status).toBe(403);
    } finally {
      await sbx.kill();
    }
  });
});

describe('bodies the engine does not read', () => {
  it("passes on the engine's own answer when it answers before reading the body (an unknown image's tag: 404, never a 502)", { timeout: 120_000 }, async () => {
    // The engine answers a tag of an unknown image from the request head and closes the connection; a body written
    // after that fails with EPIPE. The gate sends small bodies with the head, so every call gets the engine's 404.
    const viaGate = new Docker({ socketPath });
    const missing = `sha256:${randomBytes(32).toString('hex')}`;
    const answers = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 4 }, async (_, worker) => {
        for (let i = 0; i < 75; i++) {
          const status = await viaGate
            .getImage(missing)
            .tag({ repo: 'tidepool/snapshot', tag: `gate-${run}-${worker}-${i}` })
            .then(
              () => 'tagged',
              (error: { statusCode?: number; message: string }) => `${error.statusCode} ${error.statusCode === 404 ? '' : error.message}`,
            );
          answers.set(status, (answers.get(status) ?? 0) + 1);
        }
      }),
    );
    expect(Object.fromEntries(answers)).toEqual({ '404 ': 300 });
  });
});

describe('calls the platform never makes', () => {
  /** A create through the gate; on no network unless the body says otherwise (the default bridge is refused). */
  const create = (body: Record<string, unknown>, name = `gate-refused-${run}-${randomBytes(3).toString('hex')}`) =>
    gateCall('POST', `/containers/create?name=${name}`, {
      Image: 'tidepool/base:latest',
      Entrypoint: ['/bin/true'],
      Cmd: [],
      ...body,
      HostConfig: { NetworkMode: 'none', ...(body.HostConfig as Record<string, unknown> | undefined) },
    });

  it('refuses dangerous container creates and creates nothing', async () => {
    const before = await containersMarked();
    const refused = [
      await create({ Labels: platformLabels, HostConfig: { Privileged: true } }),
      await create({ Labels: platformLabels, HostConfig: { privileged: true } }),
      await create({ Labels: platformLabels, Privileged: true }),
      await create({ Labels: platformLabels, HostConfig: { Binds: ['/:/host'] } }),
      await create({ Labels: platformLabels, HostConfig: { Mounts: [{ Type: 'bind', Source: '/var/run/docker.sock', Target: '/s' }] } }),
      await create({ Labels: platformLabels, HostConfig: { PidMode: 'host' } }),
      await create({ Labels: platformLabels, HostConfig: { IpcMode: 'host' } }),
      await create({ Labels: platformLabels, HostConfig: { NetworkMode: 'host' } }),
      await create({ Labels: platformLabels, HostConfig: { CapAdd: ['SYS_ADMIN'] } }),
      await create({ Labels: platformLabels, HostConfig: { Devices: [{ PathOnHost: '/dev/kmsg', PathInContainer: '/dev/kmsg', CgroupPermissions: 'r' }] } }),
      await create({ Labels: platformLabels, HostConfig: { SecurityOpt: ['seccomp=unconfined'] } }),
      await create({ Labels: platformLabels, HostConfig: { MaskedPaths: [] } }),
      await create({ Labels: platformLabels, HostConfig: { ReadonlyPaths: [] } }),
      await create({ Labels: platformLabels, MaskedPaths: [], ReadonlyPaths: [] }),
      await create({ Labels: { [MARK]: run } }),
      await create({ Labels: { [MARK]: run, 'dev.tidepool.firewall-helper': 'true' }, User: '0', Entrypoint: ['/bin/sh', '-c', 'chroot /host sh'], HostConfig: { NetworkMode: 'host', CapAdd: ['NET_ADMIN'], Binds: ['/:/host'] } }),
    ];
    for (const answer of refused) {
      expect(answer.status).toBe(403);
      expect(answer.body.message).toMatch(/^docker gate: /);
    }
    expect(await containersMarked()).toEqual(before);
    mkdirSync(volumeDir('escape'), { recursive: true });
    symlinkSync('/', volumeDir('link'));
    for (const source of [dir, volumeDir('link'), join(volumeDir('link'), 'etc'), `${volumesRoot}/../gate.sock`]) {
      const answer = await create({ Labels: platformLabels, HostConfig: { Mounts: [{ Type: 'bind', Source: source, Target: '/mnt/v', BindOptions: { Propagation: 'rprivate' } }] } });
      expect(answer.status, source).toBe(403);
    }
    expect(await containersMarked()).toEqual(before);
    const bad = await gateCall('POST', '/containers/create', '{"Image": "tidepool/base:latest", "Labels": ');
    expect(bad.status).toBe(400);
  });

  it('lets a platform container bind a directory under the allowed roots (sandbox volumes)', async () => {
    mkdirSync(volumeDir('ok'), { recursive: true });
    const answer = await create({ Labels: platformLabels, HostConfig: { Mounts: [{ Type: 'bind', Source: volumeDir('ok'), Target: '/mnt/v', ReadOnly: false, BindOptions: { Propagation: 'rprivate' } }] } });
    expect(answer.status).toBe(201);
    expect((await engine.getContainer(answer.body.Id).inspect()).Mounts.map((m) => m.Source)).toEqual([volumeDir('ok')]);
    expect((await gateCall('DELETE', `/containers/${answer.body.Id}?force=true`)).status).toBe(204);
  });

  it('refuses a volume that is a link to a path the gate cannot see (the engine would follow it on the host)', async () => {
    // In compose the gate sees only the volumes directory: a link to /root/.ssh dangles there but not on the host.
    // A dangling link stands for it here; with Binds the engine would even make the missing target on the host.
    const link = volumeDir('hostlink');
    mkdirSync(volumesRoot, { recursive: true });
    symlinkSync(join(dir, `host-only-${run}`, '.ssh'), link);
    const before = await containersMarked();
    const name = `gate-hostlink-${run}`;
    for (const host of [{ Binds: [`${link}:/mnt/v`] }, { Mounts: [{ Type: 'bind', Source: link, Target: '/mnt/v', BindOptions: { Propagation: 'rprivate' } }] }]) {
      const answer = await create({ Labels: platformLabels, HostConfig: host }, name);
      expect(answer.status, JSON.stringify(host)).toBe(403);
      expect(answer.body.message).toMatch(/symbolic link/);
    }
    expect(await containersMarked()).toEqual(before);
    expect((await engine.listContainers({ all: true, filters: { name: [name] } })).length).toBe(0);
    expect(existsSync(join(dir, `host-only-${run}`))).toBe(false);
  });

  it('refuses operations on containers the platform did not make, and leaves them alone', async () => {
    const id = outsider.id;
    for (const [method, path, body] of [
      ['POST', `/containers/${id}/exec`, { Cmd: ['touch', '/tmp/pwned'], AttachStdout: true }],
      ['POST', `/containers/gate-outsider-${run}/exec`, { Cmd: ['true'] }],
      ['POST', `/v1.41/containers/${id.slice(0, 12)}/kill`],
      ['POST', `/containers/${id}/stop`],
      ['POST', `/containers/${id}/pause`],
      ['DELETE', `/containers/${id}?force=true`],
      ['GET', `/containers/${id}/json`],
      ['GET', `/containers/${id}/archive?path=/etc/hostname`],
      ['PUT', `/containers/${id}/archive?path=/tmp`, ''],
      ['POST', `/commit?container=${id}&repo=tidepool/layer&tag=gate-test-${run}`],
      ['GET', `/containers/${id}/logs?stdout=1`],
    ] as [string, string, unknown?][]) {
      const answer = await gateCall(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(403);
      expect(answer.body.message).toMatch(/not a Tidepool platform container/);
    }
    const info = await outsider.inspect();
    expect(info.State.Running).toBe(true);
    expect(info.State.Paused).toBe(false);
    expect(info.ExecIDs ?? []).toEqual([]);
    expect(await engine.listImages({ filters: { reference: [`gate-test-${run}`, `tidepool/layer:gate-test-${run}`] } })).toEqual([]);
    expect((await gateCall('DELETE', '/containers/no-such-container-here')).status).toBe(404);
  });

  it('refuses secrets, plugins, swarm, builds, volumes, image imports from URLs and odd paths', async () => {
    const pluginsBefore = (await engine.listPlugins()).length;
    const swarmBefore = ((await engine.info()) as { Swarm?: { LocalNodeState?: string } }).Swarm?.LocalNodeState;
    for (const [method, path, body] of [
      ['GET', '/secrets'],
      ['GET', '/v1.41/secrets'],
      ['POST', '/secrets/create', { Name: 'x', Data: 'eA==' }],
      ['POST', '/plugins/pull?remote=vieux/sshfs', []],
      ['GET', '/plugins'],
      ['POST', '/swarm/init', { ListenAddr: '127.0.0.1:2377' }],
      ['GET', '/swarm'],
      ['GET', '/services'],
      ['POST', '/build?t=x'],
      ['POST', '/volumes/create', { Name: `gate-${run}`, DriverOpts: { type: 'none', o: 'bind', device: '/' } }],
      ['POST', `/images/create?fromSrc=http://127.0.0.1:1/x.tar&repo=gate-test-${run}`],
      ['POST', '/images/load'],
      ['GET', '/system/df'],
      ['POST', '/networks/tidepool-test/connect', { Container: 'x' }],
      ['POST', '/networks/create', { Name: `gate-${run}`, Driver: 'macvlan', Options: { parent: 'eth0' } }],
      ['POST', '/networks/create', { Name: `gate-${run}`, Driver: 'bridge', Labels: { 'dev.tidepool.managed': 'true' }, Options: { 'com.docker.network.bridge.name': 'docker0' } }],
    ] as [string, string, unknown?][]) {
      const answer = await gateCall(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(403);
      expect(typeof answer.body.message).toBe('string');
    }
    // The firewall helper's image name cannot be moved onto another image (it runs as root on the host).
    const helperBefore = (await engine.getImage('tidepool/base:latest').inspect()).Id;
    expect((await gateCall('POST', '/images/tidepool/debian:bookworm/tag?repo=tidepool/base&tag=latest')).status).toBe(403);
    expect((await gateCall('DELETE', '/images/tidepool/base:latest?force=true')).status).toBe(403);
    expect((await engine.getImage('tidepool/base:latest').inspect()).Id).toBe(helperBefore);
    // Nor can any other image of the stack (DOCKER_GATE_PROTECTED_IMAGES): the next `up` would run it with the socket.
    const stackBefore = (await engine.getImage(stackImage).inspect()).Id;
    const [stackRepo, stackTag] = stackImage.split(':');
    for (const [method, path] of [
      ['POST', `/images/tidepool/base:latest/tag?repo=${stackRepo}&tag=${stackTag}`],
      ['POST', `/images/tidepool/base:latest/tag?repo=${stackImage}`],
      ['POST', `/images/create?fromImage=${stackRepo}&tag=${stackTag}`],
      ['POST', `/images/create?fromSrc=-&repo=${stackRepo}&tag=${stackTag}`],
      ['DELETE', `/images/${stackImage}?force=true`],
      ['DELETE', `/images/${stackBefore}?force=true`],
      ['DELETE', `/images/${stackBefore.replace('sha256:', '').slice(0, 12)}?force=true`],
      ['POST', `/build?t=${stackImage}`],
      ['POST', `/images/${stackRepo}/push?tag=${stackTag}`],
    ]) {
      expect((await gateCall(method!, path!)).status, `${method} ${path}`).toBe(403);
    }
    expect((await engine.getImage(stackImage).inspect()).Id).toBe(stackBefore);
    // Another name of that image, in the platform's repositories, is removed as that name only (the protected one stays).
    await engine.getImage(stackImage).tag({ repo: 'tidepool/template', tag: `gate-extra-${run}` });
    const untag = await gateCall('DELETE', `/images/tidepool/template:gate-extra-${run}?force=true`);
    expect(untag.status).toBe(200);
    expect(untag.body).toEqual([{ Untagged: `tidepool/template:gate-extra-${run}` }]);
    expect((await engine.getImage(stackImage).inspect()).Id).toBe(stackBefore);
    expect((await gateCall('DELETE', `/images/tidepool/template:gate-no-such-${run}`)).status).toBe(404);
    for (const path of ['/containers/../secrets', '/v1.12/containers/x/start', '/containers/%2e%2e/json']) {
      expect((await gateCall('GET', path)).status, path).toBe(400);
    }
    expect((await engine.listPlugins()).length).toBe(pluginsBefore);
    expect(((await engine.info()) as { Swarm?: { LocalNodeState?: string } }).Swarm?.LocalNodeState).toBe(swarmBefore);
    expect((await engine.listVolumes()).Volumes?.some((v) => v.Name === `gate-${run}`)).toBe(false);
    expect((await engine.listNetworks({ filters: { name: [`gate-${run}`] } })).length).toBe(0);
    expect(await engine.listImages({ filters: { reference: [`gate-test-${run}`] } })).toEqual([]);
    expect(gateLog.filter((l) => l.msg === 'call refused').length).toBeGreaterThan(10);
  });

  it('writes image names only in the platform\'s repositories: no retag, commit, import or removal of another name', { timeout: 120_000 }, async () => {
    // A name outside the platform's repositories standing for debian:bookworm (compose rebuilds the stack from it);
    // the test's own name, so that nothing shared would move if the gate let the call through.
    const foreign = `gate-test-${run}/debian`;
    const baseId = (await engine.getImage('tidepool/base:latest').inspect()).Id;
    const container = await create({ Labels: platformLabels, Entrypoint: ['/bin/sleep', '60'] });
    expect(container.status).toBe(201);
    const id: string = container.body.Id;
    try {
      for (const [method, path] of [
        ['POST', `/images/tidepool/base:latest/tag?repo=${foreign}&tag=bookworm`],
        ['POST', `/images/tidepool/base:latest/tag?repo=${foreign}:bookworm`],
        ['POST', `/images/${baseId}/tag?repo=docker.io/${foreign}&tag=bookworm`],
        ['POST', `/commit?container=${id}&repo=${foreign}&tag=bookworm`],
        ['POST', `/images/create?fromSrc=-&repo=${foreign}&tag=bookworm`],
      ]) {
        const answer = await gateCall(method!, path!);
        expect(answer.status, `${method} ${path}`).toBe(403);
        expect(answer.body.message, `${method} ${path}`).toMatch(/not in the platform's repositories/);
      }
      expect(await engine.listImages({ filters: { reference: [`${foreign}:*`] } })).toEqual([]);
      // An image with only a name outside them, made straight on the engine, is not removed through the gate,
      // by name or by id.
      const foreignImage = ((await engine.getContainer(id).commit({ repo: foreign, tag: 'bookworm' })) as { Id: string }).Id;
      for (const reference of [`${foreign}:bookworm`, foreignImage, foreignImage.replace('sha256:', '').slice(0, 12)]) {
        const answer = await gateCall('DELETE', `/images/${reference}?force=true`);
        expect(answer.status, reference).toBe(403);
        expect(answer.body.message, reference).toMatch(/not in the platform's repositories|outside the platform's repositories/);
      }
      expect((await engine.getImage(`${foreign}:bookworm`).inspect()).Id).toBe(foreignImage);
      // The platform's own names still work (what snapshots and builds do).
      expect((await gateCall('POST', `/images/${baseId}/tag?repo=tidepool/snapshot&tag=gate-${run}`)).status).toBe(201);
      expect((await gateCall('DELETE', `/images/tidepool/snapshot:gate-${run}`)).status).toBe(200);
    } finally {
      await engine.getContainer(id).remove({ force: true }).catch(() => undefined);
      await engine.getImage(`${foreign}:bookworm`).remove().catch(() => undefined);
      await engine.getImage(`tidepool/snapshot:gate-${run}`).remove().catch(() => undefined);
    }
    expect((await engine.getImage('tidepool/base:latest').inspect()).Id).toBe(baseId);
  });

  it('joins containers only to the platform\'s networks, with no aliases, links or addresses', { timeout: 120_000 }, async () => {
    // A network the platform did not make (like compose's `gate` network, or another project's), straight on the engine.
    const other = `gate-other-${run}`;
    /** The test platform's sandbox network (support/start-platform.ts), which it made with its label. */
    const sandboxNetwork = 'tidepool-test';
    await engine.createNetwork({ Name: other, Driver: 'bridge', Labels: { [MARK]: run } });
    const before = await containersMarked();
    try {
      const refused: [string, Record<string, unknown>, RegExp][] = [
        ['another network', { HostConfig: { NetworkMode: other } }, /not a Tidepool platform network/],
        ['another network, as an endpoint', { HostConfig: { NetworkMode: sandboxNetwork }, NetworkingConfig: { EndpointsConfig: { [other]: {} } } }, /not a Tidepool platform network/],
        ['the default bridge', { HostConfig: { NetworkMode: 'bridge' } }, /default bridge/],
        ['the default bridge, by default', { HostConfig: { NetworkMode: '' } }, /default bridge/],
        ['an alias on the platform network', { HostConfig: { NetworkMode: sandboxNetwork }, NetworkingConfig: { EndpointsConfig: { [sandboxNetwork]: { Aliases: ['docker-gate', 'api'] } } } }, /endpoint setting aliases/],
        ['a link', { HostConfig: { NetworkMode: sandboxNetwork }, NetworkingConfig: { EndpointsConfig: { [sandboxNetwork]: { Links: [`gate-outsider-${run}:db`] } } } }, /endpoint setting links/],
        ['a chosen address', { HostConfig: { NetworkMode: sandboxNetwork }, NetworkingConfig: { EndpointsConfig: { [sandboxNetwork]: { IPAMConfig: { IPv4Address: '172.31.255.254' } } } } }, /endpoint setting ipamconfig/],
        ['endpoint driver options', { HostConfig: { NetworkMode: sandboxNetwork }, NetworkingConfig: { EndpointsConfig: { [sandboxNetwork]: { DriverOpts: { x: 'y' } } } } }, /endpoint setting driveropts/],
      ];
      for (const [what, body, reason] of refused) {
        const answer = await create({ Labels: platformLabels, ...body });
        expect(answer.status, what).toBe(403);
        expect(answer.body.message, what).toMatch(reason);
      }
      expect(await containersMarked()).toEqual(before);
      expect(Object.keys((await engine.getNetwork(other).inspect()).Containers ?? {})).toEqual([]);
      // Joining after the create is no call the platform makes.
      expect((await gateCall('POST', `/networks/${other}/connect`, { Container: outsider.id })).status).toBe(403);
      // The platform's own network (labelled dev.tidepool.managed) is joined as the platform joins it.
      const joined = await create({ Labels: platformLabels, HostConfig: { NetworkMode: sandboxNetwork } });
      expect(joined.status).toBe(201);
      expect(Object.keys((await engine.getContainer(joined.body.Id).inspect()).NetworkSettings.Networks)).toEqual([sandboxNetwork]);
      await engine.getContainer(joined.body.Id).remove({ force: true });
    } finally {
      for (const id of await containersMarked()) if (!before.includes(id)) await engine.getContainer(id).remove({ force: true }).catch(() => undefined);
      await engine.getNetwork(other).remove().catch(() => undefined);
    }
  });

  it('refuses bodies with a repeated key (in any case) with 400 and creates nothing', async () => {
    const before = await containersMarked();
    const name = `gate-dup-${run}`;
    const base = `"Image":"tidepool/base:latest","Entrypoint":["/bin/true"],"Cmd":[],"Labels":${JSON.stringify(platformLabels)}`;
    for (const text of [
      `{${base},"HostConfig":{"Privileged":true,"Binds":["/:/host"]},"HostConfig":{}}`,
      `{${base},"HostConfig":{"Privileged":true,"Binds":["/:/host"]},"hostconfig":{}}`,
      `{${base},"HostConfig":{"Privileged":true,"privileged":false}}`,
      `{${base},"HostConfig":{"CapAdd":["SYS_ADMIN"]},"Host\\u0043onfig":{}}`,
      `{${base},"Labels":{"x":"1"},"HostConfig":{}}`,
    ]) {
      const answer = await gateCall('POST', `/containers/create?name=${name}`, text);
      expect(answer.status, text).toBe(400);
      expect(answer.body.message).toMatch(/^docker gate: container create refused: the body repeats the key/);
    }
    expect(await containersMarked()).toEqual(before);
    expect((await engine.listContainers({ all: true, filters: { name: [name] } })).length).toBe(0);
  });

  describe('the firewall helper container', () => {
    const helperBody = {
      Image: 'tidepool/base:latest',
      Entrypoint: ['/bin/sh', '-c', "exec chroot /host iptables -w '-S' 'DOCKER-USER'"],
      Cmd: [],
      Env: [],
      User: '0',
      Labels: { 'dev.tidepool.firewall-helper': 'true', [MARK]: run },
      HostConfig: { NetworkMode: 'host', CapAdd: ['NET_ADMIN', 'NET_RAW'], Binds: ['/:/host'], AutoRemove: false },
    };

    function tarOf(name: string, content: string): Promise<Buffer> {
      const pack = tar.pack();
      pack.entry({ name, mode: 0o644 }, content);
      pack.finalize();
      const chunks: Buffer[] = [];
      return new Promise((resolve, reject) => {
        pack.on('data', (chunk: Buffer) => chunks.push(chunk));
        pack.on('end', () => resolve(Buffer.concat(chunks)));
        pack.on('error', reject);
      });
    }

    it('is no door to the host: only start (once), wait, logs and remove', { timeout: 120_000 }, async () => {
      const created = await gateCall('POST', '/containers/create', helperBody);
      expect(created.status).toBe(201);
      const id: string = created.body.Id;
      const archive = await tarOf('pwned', 'written through the helper');
      for (const [method, path, body] of [
        ['PUT', `/containers/${id}/archive?path=/host${dir}`, archive],
        ['GET', `/containers/${id}/archive?path=/host/etc/hostname`],
        ['HEAD', `/containers/${id}/archive?path=/host/etc`],
        ['POST', `/containers/${id}/exec`, { Cmd: ['chroot', '/host', 'id'] }],
        ['POST', `/containers/${id}/attach?stream=1&stdin=1`],
        ['POST', `/commit?container=${id}&repo=tidepool/layer&tag=gate-test-${run}`],
        ['GET', `/containers/${id}/export`],
        ['GET', `/containers/${id}/json`],
        ['POST', `/containers/${id}/kill`],
        ['POST', `/containers/${id}/stop`],
        ['POST', `/containers/${id}/pause`],
        ['POST', `/containers/${id}/resize?h=10&w=10`],
      ] as [string, string, unknown?][]) {
        const answer = await gateCall(method, path, body);
        expect(answer.status, `${method} ${path}`).toBe(403);
        if (method !== 'HEAD') expect(answer.body.message, `${method} ${path}`).toMatch(/firewall helper/);
      }
      expect(existsSync(join(dir, 'pwned'))).toBe(false);
      expect(await engine.listImages({ filters: { reference: [`gate-test-${run}`, `tidepool/layer:gate-test-${run}`] } })).toEqual([]);
      expect((await engine.getContainer(id).inspect()).State.Status).toBe('created');
      // What the platform does with it works.
      expect((await gateCall('POST', `/containers/${id}/start`)).status).toBe(204);
      expect((await gateCall('POST', `/containers/${id}/wait`)).body.StatusCode).toBe(0);
      expect((await gateCall('GET', `/containers/${id}/logs?stdout=1&stderr=1`)).status).toBe(200);
      // A second start would run it again: refused.
      const again = await gateCall('POST', `/containers/${id}/start`);
      expect(again.status).toBe(403);
      expect(again.body.message).toMatch(/already started/);
      expect((await gateCall('DELETE', `/containers/${id}?force=true`)).status).toBe(204);
    });

    it('refuses to start a helper created before this gate started', { timeout: 120_000 }, async () => {
      const created = await gateCall('POST', '/containers/create', helperBody);
      expect(created.status).toBe(201);
      const id: string = created.body.Id;
      const laterSocket = join(dir, 'later-gate.sock');
      const later = await startGate({ ...gateSettings, listen: { socketPath: laterSocket } }, pino({ level: 'silent' }));
      try {
        const answer = await gateCall('POST', `/containers/${id}/start`, undefined, {}, laterSocket);
        expect(answer.status).toBe(403);
        expect(answer.body.message).toMatch(/created before/);
        expect((await engine.getContainer(id).inspect()).State.Status).toBe('created');
      } finally {
        await later.close();
        await engine.getContainer(id).remove({ force: true });
      }
    });
  });

  it('re-checks bind sources at start: a directory swapped for a link to /etc is refused', { timeout: 120_000 }, async () => {
    const source = volumeDir(`swap${run}`);
    mkdirSync(source, { recursive: true });
    const created = await gateCall('POST', `/containers/create?name=gate-swap-${run}`, {
      Image: 'tidepool/base:latest',
      Entrypoint: ['/bin/sh', '-c', 'cat /mnt/v/hostname'],
      Cmd: [],
      Labels: platformLabels,
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'bind', Source: source, Target: '/mnt/v', BindOptions: { Propagation: 'rprivate' } }] },
    });
    expect(created.status).toBe(201);
    const id: string = created.body.Id;
    try {
      rmSync(source, { recursive: true });
      symlinkSync('/etc', source);
      const answer = await gateCall('POST', `/containers/${id}/start`);
      expect(answer.status).toBe(403);
      expect(answer.body.message).toMatch(/symbolic link/);
      expect((await engine.getContainer(id).inspect()).State.Status).toBe('created');
      // Copying out of the stopped container would mount the link too.
      const copy = await gateCall('GET', `/containers/${id}/archive?path=/mnt/v/hostname`);
      expect(copy.status).toBe(403);
      // Put back as a directory, it starts.
      rmSync(source);
      mkdirSync(source);
      expect((await gateCall('POST', `/containers/${id}/start`)).status).toBe(204);
    } finally {
      await engine.getContainer(id).remove({ force: true }).catch(() => undefined);
    }
  });

  it('survives malformed requests and keeps serving', async () => {
    const net = await import('node:net');
    for (const garbage of ['GARBAGE\r\n\r\n', 'GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nxxxxx', 'POST /containers/create HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', '\x00\x01\x02']) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(socketPath, () => socket.end(garbage));
        socket.on('data', () => undefined);
        socket.on('close', () => resolve());
        socket.on('error', () => resolve());
      });
    }
    const upgrade = await gateCall('POST', '/secrets/create', undefined, { connection: 'Upgrade', upgrade: 'tcp' });
    expect(upgrade.status).toBe(403);
    expect((await gateCall('GET', '/_ping')).status).toBe(200);
  });
});

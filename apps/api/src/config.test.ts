import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, settingEnvNames } from './config.ts';
import { nodeAgentProblems, nodeSecretProblems } from './node-agent/node-agent-settings.ts';
import { defaultIsolationMode } from './runtime/docker/docker-settings.ts';
import { defaultMaxSandboxes } from './sandboxes/sandbox-settings.ts';

describe('loadConfig', () => {
  it('applies defaults and reads TIDEPOOL_* variables', () => {
    const config = loadConfig({ TIDEPOOL_PORT: '8080', TIDEPOOL_API_KEYS: 'e2b_abc, e2b_def' });
    expect(config).toMatchObject({ port: 8080, host: '127.0.0.1', apiKeys: ['e2b_abc', 'e2b_def'], maxSandboxes: defaultMaxSandboxes(totalmem()), baseImage: 'tidepool/base:latest' });
  });

  it('sizes the default sandbox limit from the machine memory: one per 40 MiB, at least 100', () => {
    const gib = 1024 ** 3;
    expect(defaultMaxSandboxes(24 * gib)).toBe(614);
    expect(defaultMaxSandboxes(2 * gib)).toBe(100);
    expect(loadConfig({ TIDEPOOL_MAX_SANDBOXES: '7' }).maxSandboxes).toBe(7);
  });

  it('team quotas default to the platform limits (one team alone is not limited further), are read and checked against them', () => {
    expect(loadConfig({ TIDEPOOL_MAX_SANDBOXES: '40', TIDEPOOL_MAX_CONCURRENT_BUILDS: '3', TIDEPOOL_MAX_QUEUED_BUILDS: '5' })).toMatchObject({ teamMaxSandboxes: 40, teamMaxBuilds: 8, teamPoolSharePercent: 100 });
    // A programmatic platform limit is followed by the team default too.
    expect(loadConfig({}, { maxSandboxes: 3 }).teamMaxSandboxes).toBe(3);
    expect(loadConfig({ TIDEPOOL_MAX_SANDBOXES: '40', TIDEPOOL_TEAM_MAX_SANDBOXES: '20', TIDEPOOL_TEAM_MAX_BUILDS: '1', TIDEPOOL_TEAM_POOL_SHARE: '50' })).toMatchObject({ teamMaxSandboxes: 20, teamMaxBuilds: 1, teamPoolSharePercent: 50 });
    expect(() => loadConfig({ TIDEPOOL_TEAM_MAX_SANDBOXES: '0' })).toThrow(/TIDEPOOL_TEAM_MAX_SANDBOXES: Expected integer to be greater or equal to 1/);
    expect(() => loadConfig({ TIDEPOOL_TEAM_MAX_BUILDS: 'many' })).toThrow(/TIDEPOOL_TEAM_MAX_BUILDS: .*\(got "many"\)/);
    expect(() => loadConfig({ TIDEPOOL_TEAM_POOL_SHARE: '150' })).toThrow(/TIDEPOOL_TEAM_POOL_SHARE/);
    expect(() => loadConfig({ TIDEPOOL_MAX_SANDBOXES: '10', TIDEPOOL_TEAM_MAX_SANDBOXES: '11' })).toThrow(
      'TIDEPOOL_TEAM_MAX_SANDBOXES (11) must not exceed TIDEPOOL_MAX_SANDBOXES (10): no team can hold more sandboxes than the platform; lower it, or unset it to let one team use the whole platform',
    );
    expect(() => loadConfig({ TIDEPOOL_MAX_CONCURRENT_BUILDS: '2', TIDEPOOL_MAX_QUEUED_BUILDS: '0', TIDEPOOL_TEAM_MAX_BUILDS: '3' })).toThrow(/TIDEPOOL_TEAM_MAX_BUILDS \(3\) must not exceed TIDEPOOL_MAX_CONCURRENT_BUILDS \+ TIDEPOOL_MAX_QUEUED_BUILDS \(2\)/);
    // A malformed platform limit is reported under its own name only.
    const problems = (() => {
      try {
        loadConfig({ TIDEPOOL_MAX_SANDBOXES: 'lots' });
      } catch (error) {
        return (error as Error).message;
      }
      return '';
    })();
    expect(problems).toMatch(/TIDEPOOL_MAX_SANDBOXES/);
    expect(problems).not.toMatch(/TIDEPOOL_TEAM_MAX_SANDBOXES/);
  });

  it('names the variable and the problem when a value is wrong', () => {
    expect(() => loadConfig({ TIDEPOOL_PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ TIDEPOOL_PORT: 'eighty' })).toThrow(/TIDEPOOL_PORT/);
    expect(() => loadConfig({ TIDEPOOL_MAX_SANDBOXES: '0' })).toThrow(/TIDEPOOL_MAX_SANDBOXES/);
    expect(() => loadConfig({ TIDEPOOL_API_KEYS: 'not-a-key' })).toThrow(/TIDEPOOL_API_KEYS/);
    expect(() => loadConfig({ TIDEPOOL_LOG_LEVEL: 'loud' })).toThrow(/TIDEPOOL_LOG_LEVEL/);
    expect(() => loadConfig({ TIDEPOOL_DEFAULT_TIMEOUT: '0' })).toThrow(/TIDEPOOL_DEFAULT_TIMEOUT/);
    expect(() => loadConfig({ TIDEPOOL_DEFAULT_TIMEOUT: '600', TIDEPOOL_MAX_TIMEOUT_SECONDS: '60' })).toThrow(/must not exceed TIDEPOOL_MAX_TIMEOUT_SECONDS/);
  });

  it('reads TIDEPOOL_EGRESS_PROXY_PORTS as a list of ports (the usual proxy ports by default), and names a wrong entry', () => {
    expect(loadConfig({}).egressProxyPorts).toEqual([80, 443, 1080, 3128, 8080, 8443]);
    expect(loadConfig({ TIDEPOOL_EGRESS_PROXY_PORTS: ' 3128, 9050 ' }).egressProxyPorts).toEqual([3128, 9050]);
    for (const wrong of ['0', '65536', 'socks', '3128,,80', '3128;80', '1.5']) {
      expect(() => loadConfig({ TIDEPOOL_EGRESS_PROXY_PORTS: wrong }), wrong).toThrow(/TIDEPOOL_EGRESS_PROXY_PORTS/);
    }
  });

  it('reads TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES (1 GiB by default), a positive integer', () => {
    expect(loadConfig({}).volumeUploadMaxBytes).toBe(1024 ** 3);
    expect(loadConfig({ TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES: '10485760' }).volumeUploadMaxBytes).toBe(10 * 1024 * 1024);
    for (const wrong of ['0', '-1', '1G', '1e9']) {
      expect(() => loadConfig({ TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES: wrong }), wrong).toThrow(/TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES/);
    }
  });

  it('reads TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS as IPv4 CIDRs or addresses, and names a wrong entry', () => {
    expect(loadConfig({}).egressProxyAllowedCidrs).toEqual([]);
    expect(loadConfig({ TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS: ' 10.8.0.0/16, 192.168.1.5 ' }).egressProxyAllowedCidrs).toEqual(['10.8.0.0/16', '192.168.1.5']);
    for (const wrong of ['10.8.0.0/33', 'proxy.internal', '10.8.0.0/16,fd00::/8', '300.1.1.1']) {
      expect(() => loadConfig({ TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS: wrong }), wrong).toThrow(/TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS/);
    }
  });

  it('takes TIDEPOOL_ADMIN_KEY of 24-200 safe characters, trimmed, and never repeats a wrong one', () => {
    expect(loadConfig({}).adminKey).toBe('');
    const good = `tpadmin_${randomBytes(12).toString('hex')}`;
    expect(loadConfig({ TIDEPOOL_ADMIN_KEY: ` ${good}\n` }).adminKey).toBe(good);
    for (const bad of ['short-secret-1', 'x'.repeat(201), `${'a'.repeat(30)} spaced`, `${'a'.repeat(30)}"quote`]) {
      const error = (() => {
        try {
          loadConfig({ TIDEPOOL_ADMIN_KEY: bad });
        } catch (e) {
          return e as Error;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect(error!.message).toMatch(/TIDEPOOL_ADMIN_KEY: must be 24 to 200 characters/);
      expect(error!.message).not.toContain(bad.trim());
    }
  });

  it('node settings: the embedded node id (default: the platform id) and the lost-node deadline', () => {
    expect(loadConfig({})).toMatchObject({ nodeId: '', nodeLostAfterSeconds: 30 });
    expect(loadConfig({ TIDEPOOL_NODE_ID: ' node-1.eu ', TIDEPOOL_NODE_LOST_AFTER_SECONDS: '10' })).toMatchObject({ nodeId: 'node-1.eu', nodeLostAfterSeconds: 10 });
    expect(() => loadConfig({ TIDEPOOL_NODE_ID: '../x' })).toThrow(/TIDEPOOL_NODE_ID/);
    expect(() => loadConfig({ TIDEPOOL_NODE_ID: 'n'.repeat(64) })).toThrow(/TIDEPOOL_NODE_ID/);
    expect(() => loadConfig({ TIDEPOOL_NODE_LOST_AFTER_SECONDS: '0' })).toThrow(/TIDEPOOL_NODE_LOST_AFTER_SECONDS/);
    expect(() => loadConfig({ TIDEPOOL_NODE_LOST_AFTER_SECONDS: 'soon' })).toThrow(/TIDEPOOL_NODE_LOST_AFTER_SECONDS/);
  });

  it('TIDEPOOL_EMBEDDED_NODE: on by default; off only with the cluster client settings that reach node agents', () => {
    expect(loadConfig({}).embeddedNode).toBe(true);
    const client = { TIDEPOOL_CLUSTER_CLIENT_CERT: '/c.pem', TIDEPOOL_CLUSTER_CLIENT_KEY: '/k.pem', TIDEPOOL_CLUSTER_CA: '/ca.pem' };
    expect(loadConfig({ ...client, TIDEPOOL_EMBEDDED_NODE: 'off' }).embeddedNode).toBe(false);
    expect(() => loadConfig({ TIDEPOOL_EMBEDDED_NODE: 'off' })).toThrow(/TIDEPOOL_EMBEDDED_NODE=off .*TIDEPOOL_CLUSTER_CLIENT_CERT/);
    expect(() => loadConfig({ TIDEPOOL_EMBEDDED_NODE: 'sometimes' })).toThrow(/TIDEPOOL_EMBEDDED_NODE/);
  });

  it('takes TIDEPOOL_SECRETS_KEY only as the base64 of 32 bytes, and never repeats a wrong one', () => {
    const key = randomBytes(32).toString('base64');
    expect(loadConfig({}).secretsKey).toBe('');
    expect(loadConfig({ TIDEPOOL_SECRETS_KEY: ` ${key} ` }).secretsKey).toBe(key);
    for (const wrong of [randomBytes(16).toString('base64'), 'hunter2-not-base64', `${key}x`]) {
      let message = '';
      try {
        loadConfig({ TIDEPOOL_SECRETS_KEY: wrong });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/TIDEPOOL_SECRETS_KEY must be the base64 of exactly 32 bytes \(generate one with `openssl rand -base64 32`\)/);
      expect(message).not.toContain(wrong);
    }
  });

  it('warm pool: adaptive with a floor of base=2 by default; TIDEPOOL_WARM_POOL pins sizes, off turns it off', () => {
    expect(loadConfig({})).toMatchObject({
      warmPool: {},
      warmPoolAdaptive: true,
      warmPoolMin: { base: 2 },
      warmPoolMax: 32,
      warmPoolPeriodSeconds: 10,
      warmPoolIdleSeconds: 300,
      warmPoolParallel: 4,
      warmPoolMemoryReserveMB: 2048,
    });
    expect(loadConfig({ TIDEPOOL_WARM_POOL: 'base=3' })).toMatchObject({ warmPool: { base: 3 }, warmPoolAdaptive: true });
    expect(loadConfig({ TIDEPOOL_WARM_POOL: 'off' })).toMatchObject({ warmPool: {}, warmPoolAdaptive: false });
    expect(loadConfig({ TIDEPOOL_WARM_POOL: '0', TIDEPOOL_WARM_POOL_ADAPTIVE: 'on' })).toMatchObject({ warmPool: {}, warmPoolAdaptive: true });
    expect(loadConfig({ TIDEPOOL_WARM_POOL_ADAPTIVE: 'off', TIDEPOOL_WARM_POOL_MIN: 'my-app=1, base=4' })).toMatchObject({ warmPoolAdaptive: false, warmPoolMin: { 'my-app': 1, base: 4 } });
    expect(loadConfig({ TIDEPOOL_WARM_POOL_PERIOD: '2', TIDEPOOL_WARM_POOL_IDLE: '20', TIDEPOOL_WARM_POOL_PARALLEL: '8', TIDEPOOL_WARM_POOL_MAX: '50' })).toMatchObject({
      warmPoolPeriodSeconds: 2,
      warmPoolIdleSeconds: 20,
      warmPoolParallel: 8,
      warmPoolMax: 50,
    });
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL: 'base' })).toThrow(/TIDEPOOL_WARM_POOL: .*\(got "base"\)/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_MIN: 'base=x' })).toThrow(/TIDEPOOL_WARM_POOL_MIN/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_ADAPTIVE: 'sometimes' })).toThrow(/TIDEPOOL_WARM_POOL_ADAPTIVE/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_MAX: '0' })).toThrow(/TIDEPOOL_WARM_POOL_MAX/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_PARALLEL: '100' })).toThrow(/TIDEPOOL_WARM_POOL_PARALLEL/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_PERIOD: '0' })).toThrow(/TIDEPOOL_WARM_POOL_PERIOD/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB: '-1' })).toThrow(/TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB/);
    expect(() => loadConfig({ TIDEPOOL_WARM_POOL_PERIOD: '60', TIDEPOOL_WARM_POOL_IDLE: '30' })).toThrow(/TIDEPOOL_WARM_POOL_IDLE \(30\) must be at least TIDEPOOL_WARM_POOL_PERIOD \(60\)/);
  });

  it('lxcfs and cpusets: on by default, an absolute lxcfs directory', () => {
    expect(loadConfig({})).toMatchObject({ lxcfs: 'auto', lxcfsDir: '/var/lib/tidepool-lxcfs', sandboxCpuset: true });
    expect(loadConfig({ TIDEPOOL_LXCFS: ' OFF ', TIDEPOOL_LXCFS_DIR: '/srv/lxcfs', TIDEPOOL_SANDBOX_CPUSET: 'off' })).toMatchObject({ lxcfs: 'off', lxcfsDir: '/srv/lxcfs', sandboxCpuset: false });
    expect(loadConfig({ TIDEPOOL_LXCFS: 'on' }).lxcfs).toBe('on');
    expect(() => loadConfig({ TIDEPOOL_LXCFS: 'yes' })).toThrow(/TIDEPOOL_LXCFS: .*\(got "yes"\)/);
    for (const bad of ['relative/dir', '/', '/a:b', '/a,b']) expect(() => loadConfig({ TIDEPOOL_LXCFS_DIR: bad })).toThrow(/TIDEPOOL_LXCFS_DIR/);
    expect(() => loadConfig({ TIDEPOOL_SANDBOX_CPUSET: 'maybe' })).toThrow(/TIDEPOOL_SANDBOX_CPUSET/);
  });

  it('defaults the sandbox timeout to 15 s and accepts TIDEPOOL_DOCKER_NETWORK as the network name', () => {
    expect(loadConfig({})).toMatchObject({ defaultTimeoutSeconds: 15, sandboxNetwork: 'tidepool', domain: 'tidepool.localhost', dataDir: '.data' });
    expect(loadConfig({ TIDEPOOL_DOCKER_NETWORK: 'sbx-net', TIDEPOOL_DEFAULT_TIMEOUT: '300' })).toMatchObject({ sandboxNetwork: 'sbx-net', defaultTimeoutSeconds: 300 });
  });

  it('takes the volumes host directory as an absolute path (empty = the API\'s own path)', () => {
    expect(loadConfig({}).volumesHostDir).toBe('');
    expect(loadConfig({ TIDEPOOL_VOLUMES_HOST_DIR: ' /var/lib/tidepool/volumes ' }).volumesHostDir).toBe('/var/lib/tidepool/volumes');
    expect(() => loadConfig({ TIDEPOOL_VOLUMES_HOST_DIR: 'relative/dir' })).toThrow(/TIDEPOOL_VOLUMES_HOST_DIR/);
  });

  it('TLS: off unless asked, on with a certificate, 443 by default, cert and key together, a bare domain', () => {
    expect(loadConfig({})).toMatchObject({ tls: false, httpsPort: 443, tlsCertFile: '', tlsKeyFile: '' });
    expect(loadConfig({ TIDEPOOL_TLS: 'on', TIDEPOOL_HTTPS_PORT: '8443' })).toMatchObject({ tls: true, httpsPort: 8443 });
    expect(loadConfig({ TIDEPOOL_TLS_CERT: '/c.pem', TIDEPOOL_TLS_KEY: '/k.pem' })).toMatchObject({ tls: true, tlsCertFile: '/c.pem', tlsKeyFile: '/k.pem' });
    expect(loadConfig({ TIDEPOOL_TLS: 'off', TIDEPOOL_TLS_CERT: '/c.pem', TIDEPOOL_TLS_KEY: '/k.pem' }).tls).toBe(false);
    expect(() => loadConfig({ TIDEPOOL_TLS: 'maybe' })).toThrow(/TIDEPOOL_TLS/);
    expect(() => loadConfig({ TIDEPOOL_TLS_CERT: '/c.pem' })).toThrow(/TIDEPOOL_TLS_CERT and TIDEPOOL_TLS_KEY/);
    expect(() => loadConfig({ TIDEPOOL_TLS: '1', TIDEPOOL_HTTPS_PORT: '3000' })).toThrow(/must differ from TIDEPOOL_PORT/);
    expect(() => loadConfig({ TIDEPOOL_HTTPS_PORT: '70000' })).toThrow(/TIDEPOOL_HTTPS_PORT/);
    for (const bad of ['tidepool.localhost:8443', 'https://x.test', '*.x.test', 'a..b']) expect(() => loadConfig({ TIDEPOOL_DOMAIN: bad })).toThrow(/TIDEPOOL_DOMAIN/);
    expect(loadConfig({ TIDEPOOL_DOMAIN: 'sandboxes.example.com' }).domain).toBe('sandboxes.example.com');
  });

  it('TIDEPOOL_PUBLIC_DOMAIN: the domain with an optional port, nothing else', () => {
    expect(loadConfig({}).publicDomain).toBe('');
    expect(loadConfig({ TIDEPOOL_PUBLIC_DOMAIN: 'Tidepool.localhost:8443' }).publicDomain).toBe('tidepool.localhost:8443');
    expect(loadConfig({ TIDEPOOL_DOMAIN: 'sbx.example.com', TIDEPOOL_PUBLIC_DOMAIN: 'sbx.example.com' }).publicDomain).toBe('sbx.example.com');
    expect(() => loadConfig({ TIDEPOOL_PUBLIC_DOMAIN: 'other.localhost:8443' })).toThrow(/must be TIDEPOOL_DOMAIN/);
    expect(() => loadConfig({ TIDEPOOL_PUBLIC_DOMAIN: 'https://tidepool.localhost' })).toThrow(/TIDEPOOL_PUBLIC_DOMAIN/);
  });

  it('TIDEPOOL_SANDBOX_ISOLATION: require by default where rules can be installed (root, iptables), warn elsewhere, either when set', () => {
    expect(defaultIsolationMode({ uid: 0, iptables: true })).toBe('require');
    expect(defaultIsolationMode({ uid: 1000, iptables: true })).toBe('warn');
    expect(defaultIsolationMode({ uid: 0, iptables: false })).toBe('warn');
    expect(defaultIsolationMode({ uid: undefined, iptables: true })).toBe('warn');
    // This machine runs the suites as root with iptables: the default there fails closed.
    const here = process.getuid?.() === 0 && existsSync('/usr/sbin/iptables') ? 'require' : 'warn';
    expect(loadConfig({}).sandboxIsolation).toBe(here);
    expect(loadConfig({ TIDEPOOL_SANDBOX_ISOLATION: 'warn' }).sandboxIsolation).toBe('warn');
    expect(loadConfig({ TIDEPOOL_SANDBOX_ISOLATION: ' Require ' }).sandboxIsolation).toBe('require');
    expect(() => loadConfig({ TIDEPOOL_SANDBOX_ISOLATION: 'off' })).toThrow(/TIDEPOOL_SANDBOX_ISOLATION: .*\(got "off"\)/);
  });

  it('TIDEPOOL_DATABASE_PASSWORD_FILE puts the first line of a file (a swarm secret) into the URL, and never echoes it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-config-'));
    try {
      const file = join(dir, 'password');
      writeFileSync(file, 'p@ss:w/rd\n');
      const url = 'postgres://tidepool@db:5432/tidepool';
      const config = loadConfig({ TIDEPOOL_DATABASE_URL: url, TIDEPOOL_DATABASE_PASSWORD_FILE: file });
      const parsed = new URL(config.databaseUrl);
      expect(decodeURIComponent(parsed.password)).toBe('p@ss:w/rd');
      expect([parsed.username, parsed.host, parsed.pathname]).toEqual(['tidepool', 'db:5432', '/tidepool']);
      const refused = (env: Record<string, string>): string => {
        try {
          loadConfig(env);
        } catch (error) {
          expect(error).toBeInstanceOf(ConfigError);
          return (error as Error).message;
        }
        throw new Error('accepted');
      };
      expect(refused({ TIDEPOOL_DATABASE_PASSWORD_FILE: file })).toMatch(/TIDEPOOL_DATABASE_URL is not/);
      expect(refused({ TIDEPOOL_DATABASE_URL: 'postgres://tidepool:other@db/tidepool', TIDEPOOL_DATABASE_PASSWORD_FILE: file })).toMatch(/keep the password in one place/);
      expect(refused({ TIDEPOOL_DATABASE_URL: 'postgres://db/tidepool', TIDEPOOL_DATABASE_PASSWORD_FILE: file })).toMatch(/names no user/);
      expect(refused({ TIDEPOOL_DATABASE_URL: url, TIDEPOOL_DATABASE_PASSWORD_FILE: join(dir, 'missing') })).toMatch(/cannot read .*missing \(ENOENT\)/);
      writeFileSync(file, '\nsecond-line');
      const empty = refused({ TIDEPOOL_DATABASE_URL: url, TIDEPOOL_DATABASE_PASSWORD_FILE: file });
      expect(empty).toMatch(/is empty/);
      expect(empty).not.toContain('second-line');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads the build allowlist and the failed-key limit, with defaults, and names a wrong value', () => {
    expect(loadConfig({})).toMatchObject({ buildLocalImages: ['tidepool/*'], authFailureLimit: 20, authFailureWindowSeconds: 60, trustForwardedFor: false });
    expect(loadConfig({ TIDEPOOL_BUILD_LOCAL_IMAGES: ' tidepool/*, ubuntu:22.04 ,' }).buildLocalImages).toEqual(['tidepool/*', 'ubuntu:22.04']);
    expect(loadConfig({ TIDEPOOL_BUILD_LOCAL_IMAGES: '' }).buildLocalImages).toEqual([]);
    expect(() => loadConfig({ TIDEPOOL_BUILD_LOCAL_IMAGES: 'tidepool/(.*)' })).toThrow(/TIDEPOOL_BUILD_LOCAL_IMAGES/);
    expect(loadConfig({ TIDEPOOL_AUTH_FAILURE_LIMIT: '0', TIDEPOOL_TRUST_FORWARDED_FOR: 'true' })).toMatchObject({ authFailureLimit: 0, trustForwardedFor: true });
    expect(() => loadConfig({ TIDEPOOL_AUTH_FAILURE_LIMIT: '-1' })).toThrow(/TIDEPOOL_AUTH_FAILURE_LIMIT/);
    expect(() => loadConfig({ TIDEPOOL_AUTH_FAILURE_WINDOW: '0' })).toThrow(/TIDEPOOL_AUTH_FAILURE_WINDOW/);
    expect(() => loadConfig({ TIDEPOOL_TRUST_FORWARDED_FOR: 'maybe' })).toThrow(/TIDEPOOL_TRUST_FORWARDED_FOR/);
  });

  it('settingEnvNames lists every variable a setting is read from', () => {
    const names = settingEnvNames();
    for (const name of ['TIDEPOOL_DATABASE_URL', 'TIDEPOOL_DATABASE_PASSWORD_FILE', 'TIDEPOOL_DOCKER_HOST', 'TIDEPOOL_LXCFS', 'TIDEPOOL_DOCKER_NETWORK']) expect(names).toContain(name);
    expect(names.every((n) => /^TIDEPOOL_[A-Z0-9_]+$/.test(n))).toBe(true);
  });
});

describe('node agent and cluster client settings', () => {
  it('reads the node settings with their defaults and refuses malformed ones with the variable named', () => {
    const config = loadConfig({ TIDEPOOL_NODE_ID: 'node-1', TIDEPOOL_NODE_LISTEN: '198.19.0.11:7443', TIDEPOOL_NODE_URL: 'https://198.19.0.11:7443' });
    expect(config).toMatchObject({ nodeId: 'node-1', nodeListen: '198.19.0.11:7443', nodeUrl: 'https://198.19.0.11:7443', nodePlatformId: '', nodes: [] });
    expect(loadConfig({}).nodeListen).toBe('0.0.0.0:7443');
    expect(() => loadConfig({ TIDEPOOL_NODE_ID: '_node1' })).toThrow(/TIDEPOOL_NODE_ID/);
    expect(() => loadConfig({ TIDEPOOL_NODE_LISTEN: '7443' })).toThrow(/TIDEPOOL_NODE_LISTEN/);
    expect(() => loadConfig({ TIDEPOOL_NODE_URL: 'http://198.19.0.11:7443' })).toThrow(/TIDEPOOL_NODE_URL/);
    expect(() => loadConfig({ TIDEPOOL_NODE_PLATFORM_ID: 'a b' })).toThrow(/TIDEPOOL_NODE_PLATFORM_ID/);
  });

  it('reads TIDEPOOL_NODES (needs the cluster client settings) and refuses entries that are not https://host:port', () => {
    const client = { TIDEPOOL_CLUSTER_CLIENT_CERT: '/c.pem', TIDEPOOL_CLUSTER_CLIENT_KEY: '/k.pem', TIDEPOOL_CLUSTER_CA: '/ca.pem' };
    expect(loadConfig({ ...client, TIDEPOOL_NODES: ' https://tasks.node-agent:7443 , https://198.19.0.11:7443,https://[fd00::5]:7443' }).nodes).toEqual([
      'https://tasks.node-agent:7443',
      'https://198.19.0.11:7443',
      'https://[fd00::5]:7443',
    ]);
    for (const bad of ['http://a:7443', 'https://a', 'https://a:7443/v1', 'https://u:p@a:7443', 'a:7443', 'https://a:7443?x=1']) {
      expect(() => loadConfig({ ...client, TIDEPOOL_NODES: bad }), bad).toThrow(/TIDEPOOL_NODES/);
    }
    expect(() => loadConfig({ TIDEPOOL_NODES: 'https://a:7443' })).toThrow(/TIDEPOOL_NODES is set but TIDEPOOL_CLUSTER_CLIENT_CERT is not/);
  });

  it('refuses to hand `tidepool node` the database or an API-only secret, naming each variable', () => {
    expect(nodeSecretProblems({ TIDEPOOL_NODE_ID: 'n1' })).toEqual([]);
    const problems = nodeSecretProblems({ TIDEPOOL_DATABASE_URL: 'postgres://u:pw@h/d', TIDEPOOL_DATABASE_PASSWORD_FILE: '/pw', TIDEPOOL_SECRETS_KEY: 'x', TIDEPOOL_TOKEN_SEED_FILE: '/s', TIDEPOOL_ADMIN_KEY: 'k' });
    expect(problems.map((p) => p.split(' ')[0])).toEqual(['TIDEPOOL_DATABASE_URL', 'TIDEPOOL_DATABASE_PASSWORD_FILE', 'TIDEPOOL_SECRETS_KEY', 'TIDEPOOL_TOKEN_SEED_FILE', 'TIDEPOOL_ADMIN_KEY']);
    expect(problems.join('\n')).not.toContain('pw@');
  });

  it('asks `tidepool node` for its certificate, key and CA files, naming what is missing', () => {
    const missing = nodeAgentProblems(loadConfig({}), 'host1');
    expect(missing).toHaveLength(3);
    expect(missing.join('\n')).toMatch(/TIDEPOOL_NODE_TLS_CERT: required/);
    expect(missing.join('\n')).toMatch(/TIDEPOOL_NODE_TLS_CA: required/);
    const wrongFiles = nodeAgentProblems(loadConfig({ TIDEPOOL_NODE_TLS_CERT: '/nonexistent/cert.pem', TIDEPOOL_NODE_TLS_KEY: '/etc/hostname', TIDEPOOL_NODE_TLS_CA: '/etc/hostname' }), 'host1');
    expect(wrongFiles).toEqual(['TIDEPOOL_NODE_TLS_CERT: no such file /nonexistent/cert.pem']);
    // no id and a hostname that is no node id
    expect(nodeAgentProblems(loadConfig({ TIDEPOOL_NODE_TLS_CERT: '/etc/hostname', TIDEPOOL_NODE_TLS_KEY: '/etc/hostname', TIDEPOOL_NODE_TLS_CA: '/etc/hostname' }), 'my_host.local')[0]).toMatch(/TIDEPOOL_NODE_ID: unset/);
  });

  it('takes the API’s cluster client certificate, key and CA together or not at all', () => {
    expect(loadConfig({ TIDEPOOL_CLUSTER_CLIENT_CERT: 'c.pem', TIDEPOOL_CLUSTER_CLIENT_KEY: 'k.pem', TIDEPOOL_CLUSTER_CA: 'ca.pem' }).clusterCa).toBe('ca.pem');
    expect(() => loadConfig({ TIDEPOOL_CLUSTER_CLIENT_CERT: 'c.pem' })).toThrow(/go together/);
    expect(() => loadConfig({ TIDEPOOL_CLUSTER_CLIENT_CERT: 'c.pem', TIDEPOOL_CLUSTER_CLIENT_KEY: 'k.pem' })).toThrow(/go together/);
  });
});

describe('secret settings from files (*_FILE)', () => {
  it('reads TIDEPOOL_API_KEYS_FILE (a key or comma list a line), TIDEPOOL_ADMIN_KEY_FILE and TIDEPOOL_SECRETS_KEY_FILE (first line), and refuses both forms, a missing or an empty file without echoing it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-config-files-'));
    try {
      const write = (name: string, text: string): string => {
        const file = join(dir, name);
        writeFileSync(file, text);
        return file;
      };
      const secretsKey = randomBytes(32).toString('base64');
      const admin = 'a'.repeat(10) + randomBytes(12).toString('hex');
      const config = loadConfig({
        TIDEPOOL_API_KEYS_FILE: write('keys', 'e2b_one, e2b_two\n\ne2b_three\n'),
        TIDEPOOL_ADMIN_KEY_FILE: write('admin', `${admin}\nignored`),
        TIDEPOOL_SECRETS_KEY_FILE: write('secrets', `${secretsKey}\n`),
      });
      expect(config.apiKeys).toEqual(['e2b_one', 'e2b_two', 'e2b_three']);
      expect(config.adminKey).toBe(admin);
      expect(config.secretsKey).toBe(secretsKey);
      expect(() => loadConfig({ TIDEPOOL_ADMIN_KEY: admin, TIDEPOOL_ADMIN_KEY_FILE: join(dir, 'admin') })).toThrow(/TIDEPOOL_ADMIN_KEY and TIDEPOOL_ADMIN_KEY_FILE are both set/);
      expect(() => loadConfig({ TIDEPOOL_SECRETS_KEY_FILE: join(dir, 'missing') })).toThrow(/TIDEPOOL_SECRETS_KEY_FILE: cannot read .*missing \(ENOENT\)/);
      expect(() => loadConfig({ TIDEPOOL_API_KEYS_FILE: write('empty', '\n \n') })).toThrow(/TIDEPOOL_API_KEYS_FILE: .* is empty/);
      let message = '';
      try {
        loadConfig({ TIDEPOOL_SECRETS_KEY_FILE: write('short', 'c2hvcnQta2V5\n') });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        message = (error as Error).message;
      }
      expect(message).toMatch(/TIDEPOOL_SECRETS_KEY must be the base64 of exactly 32 bytes/);
      expect(message).not.toContain('c2hvcnQta2V5');
      expect(settingEnvNames()).toEqual(expect.arrayContaining(['TIDEPOOL_API_KEYS_FILE', 'TIDEPOOL_ADMIN_KEY_FILE', 'TIDEPOOL_SECRETS_KEY_FILE']));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

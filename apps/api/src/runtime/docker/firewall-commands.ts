import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import type { IpFamily } from './firewall-family.ts';
import { FIREWALL_HELPER_LABEL } from './docker-labels.ts';

/** The programs of each family: `iptables`/`iptables-restore` and `ip6tables`/`ip6tables-restore`. */
export const FIREWALL_PROGRAMS: Record<IpFamily, { iptables: string; restore: string }> = {
  ipv4: { iptables: 'iptables', restore: 'iptables-restore' },
  ipv6: { iptables: 'ip6tables', restore: 'ip6tables-restore' },
};

/** Runs iptables (or ip6tables, by family) in the network namespace of the Docker host. */
export interface FirewallCommands {
  /** Where the commands run, for log lines. */
  readonly where: string;
  /** `iptables -w <args>` (`ip6tables` for IPv6); resolves with stdout, rejects with stderr in the message. */
  iptables(args: string[]): Promise<string>;
  /** `iptables-restore -w --noflush` (`ip6tables-restore`) fed with `rules` (applied as one transaction). */
  restore(rules: string): Promise<void>;
  /** A file of the Docker host ('' when missing), e.g. the resolvers Docker's embedded DNS forwards to. */
  hostFile(path: string): Promise<string>;
}

/** iptables of this machine: the platform runs on the Docker host, as root. */
export class HostFirewallCommands implements FirewallCommands {
  readonly where = 'host';

  /** `programs`: which binaries run (a test names a missing one to see the platform without ip6tables). */
  constructor(private readonly programs = FIREWALL_PROGRAMS.ipv4) {}

  hostFile(path: string): Promise<string> {
    return readFile(path, 'utf8').catch(() => '');
  }

  iptables(args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(this.programs.iptables, ['-w', ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${this.programs.iptables} ${args.join(' ')}: ${stderr.trim() || error.message}`));
        else resolve(stdout);
      });
    });
  }

  restore(rules: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.programs.restore, ['-w', '--noflush'], { stdio: ['pipe', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${this.programs.restore} failed (${code}): ${stderr.trim()}`))));
      child.stdin.end(rules);
    });
  }
}

/**
 * iptables of the Docker host reached through the engine, for a platform that itself runs in a container
 * (docker-compose.yml): a short-lived helper container in the host's network namespace runs the host's own
 * iptables (its root filesystem mounted and chrooted into). Whoever holds the Docker socket may do this anyway.
 */
export class EngineFirewallCommands implements FirewallCommands {
  readonly where = 'helper container';

  constructor(
    private readonly docker: Docker,
    private readonly image: string,
    private readonly programs = FIREWALL_PROGRAMS.ipv4,
  ) {}

  private async run(script: string, env: string[]): Promise<string> {
    const container = await this.docker.createContainer({
      Image: this.image,
      Entrypoint: ['/bin/sh', '-c', script],
      Cmd: [],
      Env: env,
      User: '0',
      Labels: { [FIREWALL_HELPER_LABEL]: 'true' },
      HostConfig: { NetworkMode: 'host', CapAdd: ['NET_ADMIN', 'NET_RAW'], Binds: ['/:/host'], AutoRemove: false },
    });
    try {
      await container.start();
      const { StatusCode } = (await container.wait()) as { StatusCode: number };
      const logs = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
      const text = demultiplex(logs);
      if (StatusCode !== 0) throw new Error(`firewall helper exited ${StatusCode}: ${text.trim()}`);
      return text;
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  iptables(args: string[]): Promise<string> {
    return this.run(`exec chroot /host ${this.programs.iptables} -w ${args.map(quote).join(' ')}`, []);
  }

  hostFile(path: string): Promise<string> {
    return this.run(`cat /host${quote(path)} 2>/dev/null || true`, []).catch(() => '');
  }

  async restore(rules: string): Promise<void> {
    await this.run(`printf "%s" "$RULES" | chroot /host ${this.programs.restore} -w --noflush`, [`RULES=${rules}`]);
  }
}

function quote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** Docker's log stream without a TTY: 8-byte frame headers before each chunk. */
function demultiplex(buffer: Buffer): string {
  let text = '';
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const size = buffer.readUInt32BE(offset + 4);
    text += buffer.subarray(offset + 8, offset + 8 + size).toString();
    offset += 8 + size;
  }
  return offset === 0 ? buffer.toString() : text;
}

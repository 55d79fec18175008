import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { envdTokenArchive, envdWaitsForToken, unguessableTokenFile } from '../../envd/envd-birth-token.ts';
import { ContainerHardening } from './container-hardening.ts';
import type { EngineEvent, EngineEventStream } from '../engine-events.ts';
import type { ContainerSpec, ContainerStatus, EgressPolicy, ManagedContainer, PlatformImageBuild, SandboxImage, SandboxRuntime, StartedContainer } from '../sandbox-runtime.ts';
import { buildPlatformImage, platformImageCurrent } from './platform-image-build.ts';
import { BUILD_ROLE_LABEL, ENVD_VERSION_LABEL, PLATFORM_LABEL, POOL_LABEL, SANDBOX_LABEL, TEMPLATE_LABEL } from './docker-labels.ts';
import { followSandboxEvents } from './docker-events.ts';
import { PhaseClock } from '../../observability/phase-clock.ts';
import { pausedImageRef, sandboxOfImage } from './paused-image.ts';
import { PAUSED_IMAGE_REPOSITORY } from '../platform-repositories.ts';
import { BOOT_ID_PATH, BootIds, runtimeBindsBootId } from './boot-ids.ts';
import { EgressProxy } from './egress-proxy.ts';
import type { FIREWALL_PROGRAMS } from './firewall-commands.ts';
import type { NetworkFirewall } from './network-firewall.ts';
import { type EgressTransformDeps, EgressTransforms } from './egress-transforms.ts';
import { EgressTunnel } from './egress-tunnel.ts';
import { ConntrackReader, conntrackProblem } from './original-destination.ts';
import { DEFAULT_EGRESS_PROXY_PORTS } from './upstream-address.ts';
import { ClusterAddresses } from './cluster-addresses.ts';
import { UpstreamAddressPolicy, type UpstreamPolicySettings } from './upstream-address.ts';
import { type IsolationMode, isolateSandboxNetwork, networkSpec, recreateIfOpen } from './sandbox-network.ts';
import type { ProcFileMount } from '../lxcfs/lxcfs-files.ts';
import { CpuSets } from './cpu-sets.ts';
import { pauseWithRetries } from './freeze-retry.ts';
import type { RegistryImages } from '../registry/registry-images.ts';

/** Every sandbox runs envd under tini, whatever the image's own entrypoint and command are. */
export const ENVD_ENTRYPOINT = ['/opt/tidepool/bin/tini', '--', '/opt/tidepool/bin/envd'];

export interface DockerRuntimeOptions {
  /** Name of the bridge network sandboxes join; created when missing. */
  network: string;
  logger: Logger;
  /** Stamped on every container; reconcile only ever touches containers carrying it. */
  platformId?: string;
  docker?: Docker;
  /** What to do where sandbox isolation rules cannot be installed (default: warn loudly). */
  isolation?: IsolationMode;
  /** Image of the helper container that installs the rules when the platform itself runs in a container. */
  helperImage?: string;
  /** Limits, capabilities and runtime of every sandbox container (default: DEFAULT_HARDENING). */
  hardening?: ContainerHardening;
  /**
   * The sandbox's own /proc files (lxcfs), bound read-only into every sandbox container under the default
   * runtime; `refuse` is told when the engine (the docker gate) will not take the binds.
   */
  procFiles?: { procMounts(): ProcFileMount[]; refuse(reason: string): void };
  /** Host directory of the sandboxes' own boot ids (boot-ids.ts), bound over theirs where the runtime allows it; none = the host's. */
  bootIdDir?: string;
  /** Pins each sandbox to as many host cpus as it has (round-robin), so `nproc` and affinity match its limit. */
  cpuset?: boolean;
  /** Other iptables/ip6tables programs (tests: a missing ip6tables); the standard ones by default. */
  firewallPrograms?: Partial<typeof FIREWALL_PROGRAMS>;
  /** Destinations sandboxes may never reach besides the private ranges: the cluster's own (clusterDeniedCidrs). */
  deniedCidrs?: readonly string[];
  /** Secrets and per-sandbox CAs for network.rules transforms at the egress proxy (none: rules are not applied). */
  egressTransforms?: EgressTransformDeps;
  /** Where a sandbox's own egress proxy may be (ports, allowed private ranges, the cluster's own addresses); default: the proxy ports, no private range, this machine's addresses. */
  egressProxyPolicy?: UpstreamPolicySettings;
  /** Told when a sandbox's connection could not go through its own egress proxy (rate-limited; for its logs). */
  onEgressProxyFailure?: (sandboxId: string, message: string) => void;
  /** The cluster registry images are pushed to and pulled from (TIDEPOOL_REGISTRY); none = pushImage/pullImage refuse. */
  registry?: RegistryImages;
}

function statusCode(error: unknown): number | undefined {
  return typeof error === 'object' && error !== null && 'statusCode' in error ? Number((error as { statusCode: unknown }).statusCode) : undefined;
}

function toStatus(state: string | undefined): ContainerStatus {
  if (state === 'running') return 'running';
  if (state === 'paused') return 'paused';
  return 'stopped';
}

/** Sandboxes as Docker containers on one bridge network, reached by container IP. */
/** A name and hostname no neighbour can guess: random, unrelated to the sandbox ID. */
export function containerNames(): { name: string; Hostname: string } {
  const hostname = `sbx-${randomBytes(10).toString('hex')}`;
  return { name: `tidepool-${hostname}`, Hostname: hostname };
}

export class DockerRuntime implements SandboxRuntime {
  private readonly docker: Docker;
  private readonly network: string;
  private readonly logger: Logger;
  private readonly platformId: string | undefined;
  private readonly options: DockerRuntimeOptions;
  /** Isolation and egress rules of the sandbox network; undefined where they could not be installed. */
  private firewall: NetworkFirewall | undefined;
  /** Decides TCP 80/443 of sandboxes that allow domains (host installs only). */
  private egressProxy: EgressProxy | undefined;
  /** The sandboxes' own boot ids, where the runtime allows them (see prepareBootIds). */
  private bootIds: BootIds | undefined;
  /** Carries all TCP of sandboxes with their own egress proxy (host installs with a readable conntrack table). */
  private egressTunnel: EgressTunnel | undefined;
  private egressTunnelProblem = 'sandbox egress through a proxy needs the platform on the Docker host with its firewall installed';
  private readonly hardening: ContainerHardening;
  private cpuSets: CpuSets | undefined;

  constructor(options: DockerRuntimeOptions) {
    this.options = options;
    this.platformId = options.platformId;
    this.docker = options.docker ?? new Docker();
    this.network = options.network;
    this.logger = options.logger;
    this.hardening = options.hardening ?? new ContainerHardening();
  }

  async prepare(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (error) {
      const where = process.env.DOCKER_HOST ?? '/var/run/docker.sock';
      throw new Error(
        `cannot reach the Docker engine at ${where} (${error instanceof Error ? error.message : String(error)}): start dockerd (bash scripts/ensure-docker.sh) or set DOCKER_HOST`,
      );
    }
    await this.hardening.prepare(this.docker, this.logger, this.options.helperImage);
    await this.prepareBootIds();
    const registryProblem = await this.options.registry?.engineProblem();
    if (registryProblem) throw new Error(registryProblem);
    if (this.options.cpuset) {
      const hostCpus = Number((await this.docker.info()).NCPU);
      if (Number.isInteger(hostCpus) && hostCpus > 0) this.cpuSets = new CpuSets(hostCpus);
    }
    try {
      await this.docker.getNetwork(this.network).inspect();
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      try {
        await this.docker.createNetwork(networkSpec(this.network));
        this.logger.info({ network: this.network }, 'created sandbox network');
      } catch (createError) {
        // Someone else created it in the meantime.
        if (statusCode(createError) !== 409) throw createError;
      }
      await this.dropDuplicateNetworks();
    }
    await recreateIfOpen(this.docker, this.network, this.logger);
    this.firewall = await isolateSandboxNetwork({
      docker: this.docker,
      network: this.network,
      logger: this.logger,
      mode: this.options.isolation ?? 'warn',
      helperImage: this.options.helperImage,
      programs: this.options.firewallPrograms,
      denied: this.options.deniedCidrs,
    });
    await this.pruneEgressRules();
    await this.startEgressProxy();
  }

  /** Sandboxes get their own boot id where the runtime lets a file be bound over it; files of containers gone are removed. */
  private async prepareBootIds(): Promise<void> {
    const dir = this.options.bootIdDir;
    if (!dir) return;
    const runtime = this.hardening.runtime || 'the engine\'s default runtime';
    if (!runtimeBindsBootId(this.hardening.runtime)) {
      this.logger.warn({ runtime }, `sandboxes read the host's boot id: ${runtime} refuses binds inside /proc (crun allows it)`);
      return;
    }
    this.bootIds = new BootIds(dir, this.logger);
    const containers = await this.docker.listContainers({ all: true });
    const inUse = new Set(containers.flatMap((c) => (c.Mounts ?? []).map((m) => m.Source)));
    const removed = await this.bootIds.prune(inUse);
    if (removed > 0) this.logger.info({ removed }, 'removed the boot ids of containers that are gone');
  }

  /** Where the firewall runs on this machine, the egress proxy listens on the bridge gateway (where REDIRECT delivers). */
  private async startEgressProxy(): Promise<void> {
    if (!this.firewall || this.firewall.where !== 'host' || this.egressProxy) return;
    const info = await this.docker.getNetwork(this.network).inspect();
    const gateway = (info.IPAM?.Config ?? []).map((c: { Gateway?: string }) => c.Gateway).find((g: string | undefined) => g && !g.includes(':'));
    if (!gateway) {
      this.logger.warn({ network: this.network }, 'sandbox network has no IPv4 gateway: allowed domains are not reachable (their traffic is refused)');
      return;
    }
    const proxy = new EgressProxy(this.logger, this.options.egressTransforms && new EgressTransforms(this.options.egressTransforms, this.logger));
    const conntrack = await conntrackProblem();
    // Without the conntrack table, connections to allowed CIDRs cannot be relayed to where they were going: they go direct (untransformed).
    const originals = new ConntrackReader();
    const ports = await proxy.listen(gateway, conntrack ? undefined : (peer, port, local) => originals.lookup(peer, port, local));
    this.egressProxy = proxy;
    if (conntrack) {
      this.logger.warn({ reason: conntrack }, 'network.rules transforms do not apply to HTTP/TLS sent to an allowed CIDR on this host');
      this.egressTunnelProblem = `sandbox egress through a proxy is unavailable: ${conntrack}`;
      this.logger.warn({ reason: conntrack }, 'network.egressProxy is unavailable on this host');
      this.firewall.setRedirect(ports);
      return;
    }
    const tunnel = new EgressTunnel(this.logger, { addresses: new UpstreamAddressPolicy(this.options.egressProxyPolicy ?? { ports: DEFAULT_EGRESS_PROXY_PORTS, cluster: new ClusterAddresses([]) }), onFailure: this.options.onEgressProxyFailure });
    this.firewall.setRedirect({ ...ports, tunnel: await tunnel.listen(gateway) });
    this.egressTunnel = tunnel;
  }

  async egressUpstreamProblem(): Promise<string | undefined> {
    return this.egressTunnel ? undefined : this.egressTunnelProblem;
  }

  /** Rules of sandboxes whose container is gone (removed while no platform ran) are dropped. */
  private async pruneEgressRules(): Promise<void> {
    if (!this.firewall) return;
    const alive = new Set((await this.docker.listContainers({ all: true, filters: { label: [SANDBOX_LABEL] } })).map((c) => c.Labels[SANDBOX_LABEL]));
    for (const sandboxId of await this.firewall.sandboxesWithRules()) if (!alive.has(sandboxId)) await this.firewall.removeSandbox(sandboxId);
  }

  async egressTransformsAvailable(): Promise<boolean> {
    return this.egressProxy !== undefined && this.options.egressTransforms !== undefined;
  }

  async applyEgress(sandboxId: string, address: string, policy: EgressPolicy): Promise<void> {
    if (policy.upstream && !this.egressTunnel) throw new Error(this.egressTunnelProblem);
    this.egressProxy?.setDomains(address, policy.domains);
    this.egressProxy?.setTransforms(address, sandboxId, policy);
    const previous = this.egressTunnel?.routeOf(address);
    this.egressTunnel?.setRoute(address, policy.upstream ? { sandboxId, upstream: policy.upstream, allow: policy.allow, deny: policy.deny, domains: policy.domains ?? [] } : undefined);
    if (!this.firewall) return;
    try {
      const ipv6 = this.firewall.ipv6 ? await this.ipv6AddressOf(address) : undefined;
      await this.firewall.applySandbox(sandboxId, { ipv4: address, ipv6 }, policy);
    } catch (error) {
      // The rules did not change: neither does where the tunnel sends this address's connections.
      this.egressTunnel?.setRoute(address, previous);
      throw error;
    }
  }

  /** The IPv6 address on the sandbox network of the container that has `ipv4` there (the engine's word, never the sandbox's). */
  private async ipv6AddressOf(ipv4: string): Promise<string | undefined> {
    const info = await this.docker.getNetwork(this.network).inspect();
    const containers = Object.values((info.Containers ?? {}) as Record<string, { IPv4Address?: string; IPv6Address?: string }>);
    const entry = containers.find((c) => (c.IPv4Address ?? '').split('/')[0] === ipv4);
    return entry?.IPv6Address?.split('/')[0] || undefined;
  }

  /**
   * Engines before 25 let two racing creates make two networks of the same name, after which the name is
   * ambiguous. Every racer keeps the same one (lowest id) and removes the rest.
   */
  private async dropDuplicateNetworks(): Promise<void> {
    const sameName = (await this.docker.listNetworks({ filters: { name: [this.network] } })).filter((n) => n.Name === this.network);
    if (sameName.length < 2) return;
    const [, ...extra] = sameName.sort((a, b) => (a.Id < b.Id ? -1 : 1));
    for (const network of extra) {
      await this.docker.getNetwork(network.Id).remove().catch(() => undefined);
    }
    this.logger.warn({ network: this.network, removed: extra.length }, 'removed duplicate sandbox networks');
  }

  watchEvents(since: number | undefined, onEvent: (event: EngineEvent) => void): Promise<EngineEventStream> {
    return followSandboxEvents(this.docker, this.platformId, since, onEvent);
  }

  async imageExists(image: string): Promise<boolean> {
    try {
      await this.docker.getImage(image).inspect();
      return true;
    } catch (error) {
      if (statusCode(error) === 404) return false;
      throw error;
    }
  }

  platformImageCurrent(build: PlatformImageBuild): Promise<boolean | undefined> {
    return platformImageCurrent(this.docker, build);
  }

  buildPlatformImage(build: PlatformImageBuild, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
    return buildPlatformImage(this.docker, build, progress, signal);
  }

  async imageEnvdVersion(image: string): Promise<string | undefined> {
    const info = await this.docker.getImage(image).inspect();
    return info.Config?.Labels?.[ENVD_VERSION_LABEL];
  }

  /**
   * Starts a sandbox container, with the lxcfs binds when there are any. When it cannot start with them (lxcfs
   * died and is being restarted, or the engine refuses them), it starts without: the sandbox then sees the
   * host's /proc figures, never fails for it. A refusal (403: the docker gate's bind roots) stops the binds for good.
   */
  async startContainer(spec: ContainerSpec): Promise<StartedContainer> {
    if (this.firewall?.refusal) throw new Error(this.firewall.refusal);
    const lxcfsMounts = this.hardening.hostKernel ? (this.options.procFiles?.procMounts() ?? []) : [];
    const bootId = await this.bootIds?.mint();
    const procMounts = [...lxcfsMounts, ...(bootId ? [bootId] : [])];
    const cpuset = this.cpuSets?.take(spec.cpuCount);
    if (procMounts.length === 0) return this.startWith(spec, [], cpuset);
    try {
      return await this.startWith(spec, procMounts, cpuset);
    } catch (error) {
      await this.bootIds?.release(bootId?.source);
      const message = error instanceof Error ? error.message : String(error);
      if (statusCode(error) === 403) {
        this.options.procFiles?.refuse(`the engine refused the lxcfs binds (${message.slice(0, 300)})`);
        this.bootIds?.refuse(`the engine refused the bind (${message.slice(0, 300)})`);
      } else if (bootId && (message.includes(BOOT_ID_PATH) || message.includes(bootId.source))) {
        // Refused by the runtime, or the file is not on the engine's host (the platform in a container): not again.
        this.bootIds?.refuse(message.slice(0, 300));
      } else {
        this.logger.warn({ sandboxId: spec.sandboxId, err: error }, 'sandbox container did not start with the lxcfs binds; starting it without them');
      }
      return this.startWith(spec, [], cpuset);
    }
  }

  private async startWith(spec: ContainerSpec, procMounts: ProcFileMount[], cpuset: string | undefined): Promise<StartedContainer> {
    const phases = new PhaseClock();
    // Under a host-kernel runtime (runc, crun), an envd that waits for its token gets it after the start, while it boots (the
    // engine handles one call at a time per container, so it is asked after the start and the inspect), at a
    // path chosen now so that no file the image carries can stand in for it. Under another runtime (gVisor keeps
    // the root filesystem's upper layer inside the sandbox) a file written into a running container may not
    // show, and an older envd reads the file at once: token first there.
    const tokenAfterStart = this.hardening.hostKernel && envdWaitsForToken(spec.envdVersion);
    const tokenFile = unguessableTokenFile();
    const container = await this.docker.createContainer({
      Image: spec.image,
      // Every name a container has on a user-defined network (name, hostname, aliases) answers in Docker's
      // embedded DNS to every other container there: none may carry the sandbox ID, the only secret of a public
      // port URL. The sandbox still knows its own ID from E2B_SANDBOX_ID.
      ...containerNames(),
      Labels: {
        [SANDBOX_LABEL]: spec.sandboxId,
        [TEMPLATE_LABEL]: spec.templateId,
        [POOL_LABEL]: spec.pool ?? '',
        ...(this.platformId ? { [PLATFORM_LABEL]: this.platformId } : {}),
      },
      Env: [`E2B_SANDBOX_ID=${spec.sandboxId}`, `E2B_TEMPLATE_ID=${spec.templateId}`, `ENVD_ACCESS_TOKEN_FILE=${tokenFile}`],
      Entrypoint: ENVD_ENTRYPOINT,
      Cmd: [],
      HostConfig: {
        NetworkMode: this.network,
        NanoCpus: Math.round(spec.cpuCount * 1e9),
        ...this.hardening.hostConfig(spec.memoryMB * 1024 * 1024),
        RestartPolicy: { Name: 'no' },
        ...(cpuset ? { CpusetCpus: cpuset } : {}),
        // Only the volume's own directory is bound; private propagation, so nothing mounted later on the host shows up inside.
        // The lxcfs files are bound read-only over the container's /proc ones.
        ...(spec.directories?.length || procMounts.length
          ? {
              Mounts: [
                ...(spec.directories ?? []).map((d) => ({ Type: 'bind' as const, Source: d.source, Target: d.target, ReadOnly: false, BindOptions: { Propagation: 'rprivate' as const } })),
                ...procMounts.map((m) => ({ Type: 'bind' as const, Source: m.source, Target: m.target, ReadOnly: true, BindOptions: { Propagation: 'rprivate' as const } })),
              ],
            }
          : {}),
      },
    });
    phases.mark('create');
    try {
      if (!tokenAfterStart) {
        await container.putArchive(envdTokenArchive(spec.envdAccessToken, tokenFile), { path: '/' });
        phases.mark('token');
      }
      await container.start();
      phases.mark('start');
      const { address } = await this.inspect(container.id);
      phases.mark('inspect');
      const tokenWritten = tokenAfterStart ? container.putArchive(envdTokenArchive(spec.envdAccessToken, tokenFile), { path: '/' }).then(() => undefined) : Promise.resolve();
      tokenWritten.catch(() => undefined); // observed through egressApplied below
      if (!address) throw new Error(`container has no address on network '${this.network}'`);
      // The rules go in (and the token lands) while envd boots; the caller waits for this before anything
      // reaches the sandbox.
      const egressApplied = Promise.all([tokenWritten, this.applyEgress(spec.sandboxId, address, spec.egress ?? { allow: [], deny: [] })]).then(() => undefined);
      egressApplied.catch(() => undefined); // the caller observes it
      this.logger.debug({ sandboxId: spec.sandboxId, phasesMs: phases.done() }, 'sandbox container started');
      return { containerId: container.id, address, egressApplied };
    } catch (error) {
      this.logger.warn({ sandboxId: spec.sandboxId, err: error }, 'sandbox container failed to start; removing it');
      await this.remove(container.id);
      throw error;
    }
  }

  async pause(containerId: string): Promise<void> {
    await pauseWithRetries(() => this.docker.getContainer(containerId).pause());
  }

  async unpause(containerId: string): Promise<void> {
    await this.docker.getContainer(containerId).unpause();
  }

  async commitSandbox(containerId: string, sandboxId: string): Promise<string> {
    return this.commit(containerId, pausedImageRef(sandboxId));
  }

  async commit(containerId: string, image: string, labels: Record<string, string> = {}): Promise<string> {
    const container = this.docker.getContainer(containerId);
    const { status } = await this.inspect(containerId);
    const colon = image.lastIndexOf(':');
    const [repo, tag] = colon > image.lastIndexOf('/') ? [image.slice(0, colon), image.slice(colon + 1)] : [image, 'latest'];
    // Labels set here add to the ones the image inherits from the container (platform, sandbox).
    const changes = Object.entries(labels).map(([key, value]) => `LABEL ${key}=${JSON.stringify(value)}`);
    await container.commit({ repo, tag, pause: status === 'running', ...(changes.length > 0 ? { changes } : {}) });
    return `${repo}:${tag}`;
  }

  async tagImage(image: string, as: string): Promise<void> {
    const colon = as.lastIndexOf(':');
    const [repo, tag] = colon > as.lastIndexOf('/') ? [as.slice(0, colon), as.slice(colon + 1)] : [as, 'latest'];
    await this.docker.getImage(image).tag({ repo, tag });
  }

  async remove(containerId: string): Promise<void> {
    const sandboxId = this.firewall ? await this.sandboxOf(containerId) : undefined;
    await this.removeContainer(containerId);
    // Its address may go to another container next: the rules go with the container.
    if (sandboxId) this.egressTunnel?.dropSandbox(sandboxId);
    if (sandboxId) await this.firewall?.removeSandbox(sandboxId);
  }

  private async sandboxOf(containerId: string): Promise<string | undefined> {
    try {
      return (await this.docker.getContainer(containerId).inspect()).Config?.Labels?.[SANDBOX_LABEL];
    } catch {
      return undefined;
    }
  }

  private async removeContainer(containerId: string): Promise<void> {
    const bootIdFile = this.bootIds ? await this.bootIdFileOf(containerId) : undefined;
    await this.removeContainerOnly(containerId);
    await this.bootIds?.release(bootIdFile);
  }

  private async bootIdFileOf(containerId: string): Promise<string | undefined> {
    try {
      return this.bootIds?.fileAmong(((await this.docker.getContainer(containerId).inspect()).Mounts ?? []).map((m) => m.Source));
    } catch {
      return undefined;
    }
  }

  private async removeContainerOnly(containerId: string): Promise<void> {
    const container = this.docker.getContainer(containerId);
    try {
      await container.remove({ force: true, v: true });
    } catch (error) {
      const code = statusCode(error);
      if (code === 404) return;
      if (code === 409 && /already in progress/i.test(String((error as Error).message))) {
        await this.waitUntilGone(containerId);
        return;
      }
      if (code === 409) {
        // A frozen container must be thawed before it can be killed on some engines.
        await container.unpause().catch(() => undefined);
        await container.remove({ force: true, v: true }).catch(async (again: unknown) => {
          if (statusCode(again) === 404) return;
          if (statusCode(again) === 409) return this.waitUntilGone(containerId);
          throw again;
        });
        return;
      }
      throw error;
    }
  }

  /** Someone else (another request, the engine) is removing it: wait for that to finish. */
  private async waitUntilGone(containerId: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if ((await this.inspect(containerId)).status === 'missing') return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`container ${containerId} is still being removed after ${timeoutMs} ms`);
  }

  async pushImage(image: string, name: string): Promise<string> {
    return this.requireRegistry().push(image, name);
  }

  async pullImage(reference: string): Promise<void> {
    await this.requireRegistry().pull(reference);
  }

  private requireRegistry(): RegistryImages {
    if (!this.options.registry) throw new Error('this node has no registry configured (TIDEPOOL_REGISTRY)');
    return this.options.registry;
  }

  async claimSandboxImage(image: string, sandboxId: string): Promise<string> {
    const name = pausedImageRef(sandboxId);
    await this.tagImage(image, name);
    return name;
  }

  async removeSandboxImage(sandboxId: string): Promise<void> {
    await this.removeImage(pausedImageRef(sandboxId));
  }

  async removeImage(image: string): Promise<void> {
    try {
      await this.docker.getImage(image).remove({ force: true });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
    }
  }

  async inspect(containerId: string): Promise<{ status: ContainerStatus; address: string | undefined }> {
    try {
      const info = await this.docker.getContainer(containerId).inspect();
      const address = info.NetworkSettings?.Networks?.[this.network]?.IPAddress || undefined;
      return { status: toStatus(info.State?.Status), address };
    } catch (error) {
      if (statusCode(error) === 404) return { status: 'missing', address: undefined };
      throw error;
    }
  }

  async listManaged(): Promise<ManagedContainer[]> {
    const containers = await this.docker.listContainers({ all: true, filters: { label: [SANDBOX_LABEL] } });
    return containers
      // Build containers are not sandboxes; a sandbox of a built template inherits its image's `layer` role label.
      .filter((c) => this.isOurs(c.Labels) && c.Labels[BUILD_ROLE_LABEL] !== 'container')
      .map((c) => ({
        containerId: c.Id,
        sandboxId: c.Labels[SANDBOX_LABEL],
        status: toStatus(c.State),
        address: c.NetworkSettings?.Networks?.[this.network]?.IPAddress || undefined,
        unclaimed: this.platformId !== undefined && c.Labels[PLATFORM_LABEL] === undefined,
        pooled: Boolean(c.Labels[POOL_LABEL]),
      }));
  }

  async listSandboxImages(): Promise<SandboxImage[]> {
    const images = await this.docker.listImages({ filters: { reference: [PAUSED_IMAGE_REPOSITORY] } });
    const found: SandboxImage[] = [];
    for (const image of images) {
      // Committed images inherit the container's labels, the platform label included; the tag names the sandbox.
      if (!image.Labels || !this.isOurs(image.Labels) || image.Labels[PLATFORM_LABEL] === undefined) continue;
      for (const tag of image.RepoTags ?? []) {
        const sandboxId = sandboxOfImage(tag);
        if (sandboxId) found.push({ image: tag, sandboxId });
      }
    }
    return found;
  }

  /** Containers (and images) of this platform, plus unlabelled ones from before platform labels existed. */
  private isOurs(labels: Record<string, string>): boolean {
    const owner = labels[PLATFORM_LABEL];
    return this.platformId === undefined || owner === undefined || owner === this.platformId;
  }
}

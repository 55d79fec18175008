/**
 * A node's side of the registry: pushes images the platform made under the registry prefix and pulls them back,
 * with the node's own credentials. Pulls are single-flight per image (concurrent starts of one template on a node
 * that lacks it share one pull). Every name is checked against the prefix here, whoever asks.
 */
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { DockerCallError, engineMessage } from '../docker/docker-call.ts';
import { readProgress } from '../docker/docker-streams.ts';
import { isPullable, loadRegistrySettings, REGISTRY_NAME_PATTERN, type RegistrySettings } from './registry-settings.ts';

export class RegistryRefused extends Error {}

function splitReference(reference: string): { repo: string; tag: string } {
  const colon = reference.lastIndexOf(':');
  return { repo: reference.slice(0, colon), tag: reference.slice(colon + 1) };
}

export class RegistryImages {
  private readonly pulls = new Map<string, Promise<void>>();

  constructor(
    private readonly docker: Docker,
    readonly settings: RegistrySettings,
    private readonly logger: Logger,
  ) {}

  private auth(): Docker.AuthConfig | undefined {
    const { username, password, host } = this.settings;
    return username ? { username, password: password ?? '', serveraddress: host } : undefined;
  }

  /**
   * Why the engine cannot be used with this registry as set, or undefined: an engine that would speak plain HTTP
   * to it (listed as insecure there) needs TIDEPOOL_REGISTRY_INSECURE, so plain HTTP is never used silently.
   */
  async engineProblem(): Promise<string | undefined> {
    const info = (await this.docker.info()) as { RegistryConfig?: { IndexConfigs?: Record<string, { Secure?: boolean }>; InsecureRegistryCIDRs?: string[] } };
    const index = info.RegistryConfig?.IndexConfigs?.[this.settings.host];
    const address = this.settings.host.replace(/:[0-9]+$/, '');
    const insecureByCidr = (info.RegistryConfig?.InsecureRegistryCIDRs ?? []).some((cidr) => inCidr(address, cidr));
    const plain = index?.Secure === false || insecureByCidr;
    if (plain && !this.settings.insecure) {
      return `the Docker engine talks to the registry ${this.settings.host} over plain HTTP (it is in the engine's insecure-registries); set TIDEPOOL_REGISTRY_INSECURE=on to allow that, or serve the registry over HTTPS`;
    }
    return undefined;
  }

  /** Tags `image` as `<prefix>/<name>` and pushes it; returns that reference. `name` is `<kind>:<tag>`. */
  async push(image: string, name: string): Promise<string> {
    if (!new RegExp(REGISTRY_NAME_PATTERN).test(name)) throw new RegistryRefused(`push: ${JSON.stringify(name.slice(0, 140))} is not a name the platform pushes (<kind>:<tag>)`);
    const reference = `${this.settings.prefix}/${name}`;
    const { repo, tag } = splitReference(reference);
    const started = Date.now();
    await this.docker.getImage(image).tag({ repo, tag });
    try {
      const stream = (await this.docker.getImage(reference).push({ authconfig: this.auth() } as object)) as unknown as Readable;
      await this.follow(stream, `push ${reference}`);
    } catch (error) {
      // Nothing half-made: the registry name goes again (the image keeps its own name).
      await this.docker
        .getImage(reference)
        .remove({ noprune: true })
        .catch((untag: unknown) => this.logger.warn({ err: untag, reference }, 'could not untag an image whose push failed'));
      throw error;
    }
    this.logger.info({ image, reference, ms: Date.now() - started }, 'image pushed to the registry');
    return reference;
  }

  /** Pulls `reference` (which must be under the prefix); one pull per reference at a time, later callers share it. */
  pull(reference: string): Promise<void> {
    if (!isPullable(this.settings, reference)) {
      return Promise.reject(new RegistryRefused(`pull: ${JSON.stringify(reference.slice(0, 300))} is neither an image of this platform's registry (${this.settings.prefix}) nor one of its node images`));
    }
    let pulling = this.pulls.get(reference);
    if (!pulling) {
      pulling = this.pullNow(reference).finally(() => this.pulls.delete(reference));
      this.pulls.set(reference, pulling);
    }
    return pulling;
  }

  private async pullNow(reference: string): Promise<void> {
    const started = Date.now();
    const stream = (await this.docker.createImage(this.auth() as Docker.AuthConfig, { fromImage: reference })) as Readable;
    await this.follow(stream, `pull ${reference}`);
    this.logger.info({ reference, ms: Date.now() - started }, 'image pulled from the registry');
  }

  private async follow(stream: Readable, what: string): Promise<void> {
    try {
      await readProgress(stream, () => undefined);
    } catch (error) {
      throw new DockerCallError(`${what}: ${engineMessage(error)}`);
    }
  }
}

/** True when the IPv4 `address` is inside `cidr` (names and IPv6 are never matched: the engine resolves those itself). */
function inCidr(address: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const toInt = (ip: string): number | undefined => {
    const parts = ip.split('.').map(Number);
    return parts.length === 4 && parts.every((p) => Number.isInteger(p) && p >= 0 && p <= 255) ? parts.reduce((a, p) => a * 256 + p, 0) : undefined;
  };
  const a = toInt(address);
  const b = toInt(base);
  const n = Number(bits ?? 32);
  if (a === undefined || b === undefined || !(n >= 0 && n <= 32)) return false;
  const size = 2 ** (32 - n);
  return Math.floor(a / size) === Math.floor(b / size);
}

/** The node's registry client from its settings (the password file read now); undefined without TIDEPOOL_REGISTRY. */
export function registryImages(config: Parameters<typeof loadRegistrySettings>[0], docker: Docker, logger: Logger): RegistryImages | undefined {
  const settings = loadRegistrySettings(config);
  return settings ? new RegistryImages(docker, settings, logger) : undefined;
}

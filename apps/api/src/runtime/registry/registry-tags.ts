/**
 * Removing a pushed image from the registry (Registry HTTP API v2, as Debian's docker-registry and any OCI
 * distribution serve it): the manifest the tag points at is deleted by digest. A digest is shared by every tag
 * pointing at the same manifest, so it is deleted only when no other tag of the repository points at it. Needs the
 * registry's delete support (`storage.delete.enabled`); the blobs are freed by the registry's own garbage collection.
 * Basic authentication only (htpasswd registries); the password is never logged.
 */
import type { Logger } from 'pino';
import type { RegistrySettings } from './registry-settings.ts';

const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');
const MAX_TAGS_COMPARED = 1_000;
const CALL_TIMEOUT_MS = 15_000;

export type TagRemoval = 'removed' | 'missing' | 'shared' | 'unsupported';

export class RegistryTags {
  constructor(
    private readonly settings: RegistrySettings,
    private readonly logger: Logger,
  ) {}

  private url(path: string): string {
    return `${this.settings.insecure ? 'http' : 'https'}://${this.settings.host}/v2/${path}`;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const { username, password } = this.settings;
    return { ...extra, ...(username ? { authorization: `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}` } : {}) };
  }

  private async digestOf(repository: string, tag: string): Promise<string | undefined> {
    const response = await fetch(this.url(`${repository}/manifests/${encodeURIComponent(tag)}`), { method: 'HEAD', headers: this.headers({ accept: MANIFEST_TYPES }), signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`registry answered HTTP ${response.status} for the manifest of ${repository}:${tag}`);
    return response.headers.get('docker-content-digest') ?? undefined;
  }

  /** Removes `reference` (`<host>[/path]/<kind>:<tag>`, a name this platform pushed) from the registry. */
  async remove(reference: string): Promise<TagRemoval> {
    const withoutHost = reference.slice(this.settings.host.length + 1);
    const colon = withoutHost.lastIndexOf(':');
    const repository = withoutHost.slice(0, colon);
    const tag = withoutHost.slice(colon + 1);
    const digest = await this.digestOf(repository, tag);
    if (!digest) return 'missing';
    const list = await fetch(this.url(`${repository}/tags/list?n=${MAX_TAGS_COMPARED}`), { headers: this.headers(), signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
    const tags = list.ok ? (((await list.json()) as { tags?: string[] | null }).tags ?? []) : [];
    for (const other of tags.filter((t) => t !== tag)) {
      if ((await this.digestOf(repository, other)) === digest) {
        this.logger.info({ reference, sharedWith: other }, 'registry tag kept: another tag points at the same manifest');
        return 'shared';
      }
    }
    const deleted = await fetch(this.url(`${repository}/manifests/${digest}`), { method: 'DELETE', headers: this.headers(), signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
    await deleted.arrayBuffer();
    if (deleted.status === 404) return 'missing';
    if (deleted.status === 405) {
      this.logger.warn({ reference }, 'the registry does not allow deletes (storage.delete.enabled); the image stays until removed there');
      return 'unsupported';
    }
    if (!deleted.ok) throw new Error(`registry answered HTTP ${deleted.status} to deleting ${reference}`);
    return 'removed';
  }
}

/**
 * Which addresses the agent's tunnel may dial: those of containers its runtime manages, from `listManaged`,
 * cached briefly. A miss refreshes the list (a sandbox started a moment ago), at most once per `minRefreshMs`, so
 * a caller probing addresses cannot turn every tunnel request into an engine call.
 */
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';

export class ManagedAddresses {
  private addresses = new Set<string>();
  private fetchedAt = 0;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly runtime: Pick<SandboxRuntime, 'listManaged'>,
    private readonly options: { ttlMs?: number; minRefreshMs?: number; now?: () => number } = {},
    /** More addresses that may be dialled (the node's build containers: the API reaches their envd). */
    private readonly more?: () => Promise<string[]>,
  ) {}

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private refresh(): Promise<void> {
    this.refreshing ??= Promise.all([this.runtime.listManaged(), this.more?.() ?? []])
      .then(([containers, more]) => {
        this.addresses = new Set([...containers.filter((c) => c.status === 'running' || c.status === 'paused').flatMap((c) => (c.address ? [c.address] : [])), ...more]);
        this.fetchedAt = this.now();
      })
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  /** True when `address` belongs to a running (or frozen) managed container. */
  async has(address: string): Promise<boolean> {
    const age = this.now() - this.fetchedAt;
    if (age > (this.options.ttlMs ?? 2_000)) await this.refresh();
    else if (!this.addresses.has(address) && age > (this.options.minRefreshMs ?? 250)) await this.refresh();
    return this.addresses.has(address);
  }
}

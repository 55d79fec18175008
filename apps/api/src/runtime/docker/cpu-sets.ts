/**
 * Which host cpus a sandbox of `cpuCount` cpus runs on, so that what it sees of its cpus (sched_getaffinity:
 * `nproc`, `os.cpus()`-style counts, thread pools) matches its limit; the CFS quota (NanoCpus) still bounds its
 * time. Sandboxes are spread round-robin over the host's cpus. A sandbox with at least as many cpus as the
 * host gets no cpuset (all of them).
 */
export class CpuSets {
  private next = 0;

  constructor(private readonly hostCpus: number) {}

  /** `"0"`, `"1-2"`, `"3,0"` (docker's CpusetCpus), or undefined for every cpu. */
  take(cpuCount: number): string | undefined {
    const count = Math.ceil(cpuCount);
    if (!Number.isFinite(count) || count <= 0 || count >= this.hostCpus) return undefined;
    const cpus: number[] = [];
    for (let i = 0; i < count; i += 1) cpus.push((this.next + i) % this.hostCpus);
    this.next = (this.next + count) % this.hostCpus;
    return cpus.join(',');
  }
}

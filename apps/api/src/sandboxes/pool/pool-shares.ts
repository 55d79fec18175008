/**
 * A team's share of a warm pool (TIDEPOOL_TEAM_POOL_SHARE, a percent). What one team can drain from a pool is its
 * ready containers: each key (template build, cpu, memory) keeps `size` of them on its node, a claim takes one, and
 * the refill replaces it only once creates quiet down, so one team's burst could take every ready container and
 * leave the others cold starts. Concretely, a team's share of a key is the containers it took from that key's pool
 * that the pool has not replaced yet (claims in progress included): at most `ceil(percent × size / 100)`, and at
 * least one. A create of a team past its share starts cold (it is not refused: the sandbox quota decides that). A
 * replacement becoming ready settles the key's oldest outstanding claim; a key whose pool is whole again (as many
 * ready as its size, e.g. after it shrank) or that the pool no longer keeps settles all of them. At 100 % (the
 * default) no share is kept: a team may take the whole pool, as a single-team install expects.
 *
 * Shares are per node's pool, kept by the process that runs that pool (the one replica holding its lease): every
 * claim from it goes through that process, so its count is the whole truth for that pool.
 */
export class PoolShares {
  /** Per key, the teams of the claims the pool has not replaced yet, oldest first. */
  private readonly outstanding = new Map<string, string[]>();

  constructor(readonly percent: number) {}

  /** Containers of a key of `size` one team may hold unreplaced at once. */
  allowance(size: number): number {
    return Math.max(1, Math.ceil((this.percent * size) / 100));
  }

  /** Claims of `teamId` from `key` not replaced yet. */
  held(teamId: string, key: string): number {
    return (this.outstanding.get(key) ?? []).filter((team) => team === teamId).length;
  }

  /** True when `teamId` may take one more ready container of `key` (whose pool keeps `size`). */
  mayTake(teamId: string, key: string, size: number): boolean {
    return this.percent >= 100 || this.held(teamId, key) < this.allowance(size);
  }

  /** `teamId` took a ready container of `key`. */
  taken(teamId: string, key: string): void {
    if (this.percent >= 100) return;
    const list = this.outstanding.get(key) ?? [];
    list.push(teamId);
    this.outstanding.set(key, list);
  }

  /** A container `teamId` took from `key` went back to the pool unused: the claim is undone. */
  untaken(teamId: string, key: string): void {
    const list = this.outstanding.get(key);
    const index = list?.lastIndexOf(teamId) ?? -1;
    if (index >= 0) list!.splice(index, 1);
    if (list?.length === 0) this.outstanding.delete(key);
  }

  /** A new ready container of `key` replaces the oldest claim from it. */
  replaced(key: string): void {
    const list = this.outstanding.get(key);
    list?.shift();
    if (list?.length === 0) this.outstanding.delete(key);
  }

  /** Forgets the claims of every key `settled` says is whole again (or no longer kept). */
  settle(settled: (key: string) => boolean): void {
    for (const key of [...this.outstanding.keys()]) if (settled(key)) this.outstanding.delete(key);
  }
}

import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Suites that put stand-in hosts on the host's network (namespaces, veths, /32 routes and firewall rules in
 * 198.18.0.0/15, sysctls): they run one at a time, beside the other suites, never beside each other.
 */
const STANDIN_NETWORK_SUITES = ['network-isolation', 'egress-rules', 'egress-transforms', 'sdk-egress-proxy', 'ipv6-isolation', 'sdk-network'].map(
  (name) => `apps/api/test/${name}.test.ts`,
);

/**
 * Browser suites that load many resources from sandbox hosts (noVNC's modules): Chromium fails requests in flight
 * with ERR_NETWORK_CHANGED whenever the host's interfaces change, which the cluster and Swarm suites do all along.
 * Creating a sandbox adds an interface too: they run after every other suite has finished (a later group), one at a
 * time.
 */
const SANDBOX_PAGE_BROWSER_SUITES = ['sdk-desktop', 'dashboard-desktop-browser'].map((name) => `apps/api/test/${name}.test.ts`);

const ALL_SUITES = ['apps/*/src/**/*.test.ts', 'apps/*/test/**/*.test.ts', 'packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 600_000,
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    projects: [
      { extends: true, test: { name: 'platform', include: ALL_SUITES, exclude: [...configDefaults.exclude, ...STANDIN_NETWORK_SUITES, ...SANDBOX_PAGE_BROWSER_SUITES] } },
      { extends: true, test: { name: 'standin-network', include: STANDIN_NETWORK_SUITES, poolOptions: { forks: { maxForks: 1, minForks: 1 } } } },
      { extends: true, test: { name: 'sandbox-page-browsers', include: SANDBOX_PAGE_BROWSER_SUITES, sequence: { groupOrder: 1 }, fileParallelism: false } },
    ],
  },
});

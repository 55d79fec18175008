import { createRequire } from 'node:module';

/** One published `e2b` SDK the matrix runs, and what the "SDK versions" table of docs/clients.md says it supports. */
export interface SdkUnderTest {
  /** What the driver imports: a package name (an npm alias in the root devDependencies) or a file: URL. */
  specifier: string;
  version: string;
  /** How the version pauses a sandbox (`betaPause` before `pause` existed); null: it cannot. Resuming is `Sandbox.connect`. */
  pause: 'pause' | 'betaPause' | null;
}

const require = createRequire(import.meta.url);
const versionOf = (name: string): string => (require(`${name}/package.json`) as { version: string }).version;

/**
 * The pinned matrix: the last 1.x (users still pin 1.x), the oldest 2.0.x, and the version the other SDK suites use.
 * Bumping one is a package.json change; the suite then checks the table below against what the package has.
 */
export const PINNED_SDKS: SdkUnderTest[] = [
  { specifier: 'e2b-v1', version: versionOf('e2b-v1'), pause: null },
  { specifier: 'e2b-v2-0', version: versionOf('e2b-v2-0'), pause: 'betaPause' },
  { specifier: 'e2b', version: versionOf('e2b'), pause: 'pause' },
];

/**
 * `pnpm sdk:latest` (scripts/sdk-latest.sh) installs `e2b@latest` into a temporary directory and names its entry
 * here; the suite then runs that one version only, expecting everything the newest pinned version supports.
 */
export function sdksUnderTest(env: NodeJS.ProcessEnv = process.env): SdkUnderTest[] {
  const entry = env.TIDEPOOL_SDK_UNDER_TEST;
  if (!entry) return PINNED_SDKS;
  if (!entry.startsWith('file://')) throw new Error(`TIDEPOOL_SDK_UNDER_TEST must be a file: URL of the SDK's ESM entry, got ${entry}`);
  return [{ specifier: entry, version: env.TIDEPOOL_SDK_VERSION_UNDER_TEST ?? 'latest', pause: 'pause' }];
}

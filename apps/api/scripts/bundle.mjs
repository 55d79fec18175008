#!/usr/bin/env node
// Compiles the platform (src/main.ts: `tidepool api|node|migrate|--version`) into a release directory that runs
// on Node alone, with no TypeScript loader and no dev dependency:
//
//   node apps/api/scripts/bundle.mjs --out <dir> [--dashboard <built dashboard dir>] [--quiet]
//
//   <dir>/tidepool.mjs               the entry (esbuild, ESM), with a `#!/usr/bin/env node` line so it can be the
//                                    `tidepool` command itself
//   <dir>/chunks/*.mjs               the platform and every pure-JS dependency, one chunk per command's part (the
//                                    node agent loads no API server) and chunks of the code they share
//   <dir>/node_modules/<package>     the packages that cannot be inlined (compiled addons) and what they
//                                    require at run time: package.json, JavaScript, build/Release/*.node only
//   <dir>/dashboard/                 the built dashboard (when --dashboard is given), served at /dashboard
//   <dir>/packages.txt               the packages inlined into the bundle (for auditing an image)
//
// The addons are copied as the workspace's `pnpm install` compiled them, so run this where the release runs
// (docker/cluster/tidepool/Dockerfile does, per architecture).
import { build } from 'esbuild';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const apiRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Packages with compiled addons: required at run time from <out>/node_modules. */
export const NATIVE_PACKAGES = ['better-sqlite3'];
/** Dependencies of those that run only at install time (fetching prebuilt binaries), never when the addon loads. */
const INSTALL_ONLY = new Set(['prebuild-install']);
/**
 * Optional requires inside try/catch in inlined packages, left unresolved on purpose: pg's `pg-native` (only with
 * `new pg.native.Client`), ssh2's cpu-features and sshcrypto addon (ssh2 falls back to Node's crypto; dockerode only
 * uses ssh2 for ssh:// engine addresses).
 */
const OPTIONAL_EXTERNAL = ['pg-native', 'cpu-features', '*.node'];

/**
 * Modules a dependency requires when it loads but the platform calls only on paths it never takes: each becomes a
 * stand-in that requires the real module (still in the bundle) on its first call, so every start skips evaluating
 * them. dockerode's BuildKit session (gRPC and protobufjs; used only by `buildImage` with `version: '2'`, which the
 * platform never calls) and docker-modem's SSH agent (ssh2; only for ssh:// engine addresses). Each module exports
 * one function.
 */
const LAZY_MODULES = [
  { importer: /\/dockerode\/lib\/docker\.js$/, request: './session' },
  { importer: /\/docker-modem\/lib\/modem\.js$/, request: './ssh' },
];

/** esbuild plugin for LAZY_MODULES; fails the build when a listed require is no longer there (a dependency changed). */
function lazyModules() {
  return {
    name: 'tidepool-lazy-modules',
    setup(build) {
      const used = new Set();
      build.onResolve({ filter: /^\.\/(session|ssh)$/ }, (args) => {
        const index = LAZY_MODULES.findIndex((lazy) => lazy.request === args.path && lazy.importer.test(args.importer));
        if (index < 0 || args.pluginData?.real) return undefined;
        used.add(index);
        return { path: join(dirname(args.importer), `${args.path}.js`), namespace: 'tidepool-lazy', pluginData: { dir: dirname(args.importer), request: args.path } };
      });
      build.onLoad({ filter: /.*/, namespace: 'tidepool-lazy' }, (args) => ({
        contents: `module.exports = function () { return require(${JSON.stringify(args.pluginData.request)}).apply(this, arguments); };`,
        resolveDir: args.pluginData.dir,
        loader: 'js',
        pluginData: { real: true },
      }));
      build.onResolve({ filter: /^\.\/(session|ssh)$/, namespace: 'tidepool-lazy' }, (args) => ({ path: join(args.resolveDir, `${args.path}.js`) }));
      build.onEnd((result) => {
        if (result.errors.length > 0) return;
        const missing = LAZY_MODULES.filter((_, index) => !used.has(index));
        if (missing.length > 0) throw new Error(`lazy modules not found (a dependency changed?): ${missing.map((m) => `${m.request} from ${m.importer}`).join(', ')}`);
      });
    },
  };
}

function parseArgs(argv) {
  const out = { out: undefined, dashboard: undefined, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return resolve(v);
    };
    if (arg === '--out') out.out = value();
    else if (arg === '--dashboard') out.dashboard = value();
    else if (arg === '--quiet') out.quiet = true;
    else throw new Error(`unknown argument '${arg}' (expected --out <dir>, --dashboard <dir>, --quiet)`);
  }
  if (!out.out) throw new Error('--out <dir> is required');
  return out;
}

// Bundled CommonJS dependencies call require/__filename/__dirname: give them ESM-safe equivalents (require resolves
// from the bundle's directory, i.e. <out>/node_modules).
const BANNER = [
  '#!/usr/bin/env node',
  "import { createRequire as __tpCreateRequire } from 'node:module';",
  "import { fileURLToPath as __tpFileURLToPath } from 'node:url';",
  "import { dirname as __tpDirname } from 'node:path';",
  'const require = __tpCreateRequire(import.meta.url);',
  'const __filename = __tpFileURLToPath(import.meta.url);',
  'const __dirname = __tpDirname(__filename);',
].join('\n');

async function bundle(outdir) {
  const version = JSON.parse(readFileSync(join(apiRoot, 'package.json'), 'utf8')).version;
  if (typeof version !== 'string' || version === '') throw new Error('apps/api/package.json has no version');
  return build({
    entryPoints: [{ in: join(apiRoot, 'src', 'main.ts'), out: 'tidepool' }],
    outdir,
    outExtension: { '.js': '.mjs' },
    // src/main.ts imports each command's part when it runs: one chunk per part, shared code in chunks of its own.
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: [...NATIVE_PACKAGES, ...OPTIONAL_EXTERNAL],
    // What src/observability/api-version.ts and src/dashboard/dashboard-assets.ts read instead of files around
    // the sources (the dashboard path is relative to the bundle); src/main.ts wants a command in the release.
    define: { __TIDEPOOL_VERSION__: JSON.stringify(version), __TIDEPOOL_DASHBOARD_DIR__: JSON.stringify('../dashboard'), __TIDEPOOL_RELEASE__: 'true' },
    banner: { js: BANNER },
    plugins: [lazyModules()],
    legalComments: 'none',
    sourcemap: false,
    // Whitespace and syntax only: less to parse at every start, names kept for stack traces in the logs.
    minifyWhitespace: true,
    minifySyntax: true,
    logLevel: 'warning',
    metafile: true,
  });
}

/** package.json, LICENSE and JavaScript outside tests, build/Release/*.node: what a package needs to load. */
function shouldCopy(pkgRoot, src) {
  const rel = relative(pkgRoot, src);
  if (rel === '') return true;
  const parts = rel.split('/');
  if (parts.includes('node_modules') || parts.includes('test') || parts.includes('deps') || parts.includes('src')) return false;
  if (statSync(src).isDirectory()) return parts[0] !== 'build' || rel === 'build' || rel === 'build/Release';
  if (parts[0] === 'build') return parts.length === 3 && parts[1] === 'Release' && rel.endsWith('.node') && !rel.endsWith('test_extension.node');
  return rel === 'package.json' || rel === 'LICENSE' || rel.endsWith('.js') || rel.endsWith('.cjs') || rel.endsWith('.json');
}

/** Copies `name` (resolved from `fromDir` the way Node would) and, recursively, its run-time dependencies. */
function copyPackage(name, fromDir, modulesDir, copied) {
  if (copied.has(name)) return;
  const link = [fromDir, ...ancestors(fromDir)].map((dir) => join(dir, 'node_modules', name)).find((candidate) => existsSync(join(candidate, 'package.json')));
  if (!link) throw new Error(`${name} is not installed (looked from ${fromDir}); run pnpm install`);
  const pkgRoot = realpathSync(link);
  copied.add(name);
  cpSync(pkgRoot, join(modulesDir, name), { recursive: true, dereference: true, filter: (src) => shouldCopy(pkgRoot, src) });
  const manifest = JSON.parse(readFileSync(join(pkgRoot, 'package.json'), 'utf8'));
  // Resolved from the package's own directory, as its require() does (pnpm puts them beside it).
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    if (!INSTALL_ONLY.has(dependency)) copyPackage(dependency, pkgRoot, modulesDir, copied);
  }
}

function ancestors(dir) {
  const out = [];
  for (let current = dirname(dir); current !== dirname(current); current = dirname(current)) out.push(current);
  return out;
}

function copyNative(modulesDir) {
  const copied = new Set();
  for (const name of NATIVE_PACKAGES) {
    const link = join(apiRoot, 'node_modules', name);
    if (!existsSync(link)) throw new Error(`${name} is not installed in apps/api/node_modules; run pnpm install`);
    const release = join(realpathSync(link), 'build', 'Release');
    if (!existsSync(release) || !readdirSync(release).some((f) => f.endsWith('.node'))) {
      throw new Error(`${name} has no compiled addon in ${release}; run pnpm rebuild ${name}`);
    }
    copyPackage(name, apiRoot, modulesDir, copied);
  }
  return [...copied].sort();
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  rmSync(args.out, { recursive: true, force: true });
  mkdirSync(args.out, { recursive: true });
  const outfile = join(args.out, 'tidepool.mjs');
  const result = await bundle(args.out);
  chmodSync(outfile, 0o755); // the `tidepool` command itself (its first line names Node)
  const native = copyNative(join(args.out, 'node_modules'));
  if (args.dashboard) {
    if (!existsSync(join(args.dashboard, 'index.html'))) throw new Error(`${args.dashboard} holds no built dashboard (node apps/dashboard/scripts/build.mjs)`);
    cpSync(args.dashboard, join(args.out, 'dashboard'), { recursive: true });
  }
  const inputs = Object.keys(result.metafile.inputs).filter((p) => p.includes('node_modules/'));
  const inlined = [...new Set(inputs.map((p) => p.replace(/^.*node_modules\/(@[^/]+\/[^/]+|[^/]+).*$/, '$1')))].sort();
  writeFileSync(join(args.out, 'packages.txt'), `${inlined.join('\n')}\n`);
  if (!args.quiet) {
    const size = Object.values(result.metafile.outputs).reduce((total, output) => total + output.bytes, 0);
    process.stderr.write(`tidepool bundle: ${relative(process.cwd(), args.out)} (${(size / 1024).toFixed(0)} KiB in ${Object.keys(result.metafile.outputs).length} files, ${inlined.length} packages inlined; native: ${native.join(', ')})\n`);
  }
}

main().catch((error) => {
  process.stderr.write(`bundle failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

#!/usr/bin/env node
// Bundles envd (src/main.ts) into one ESM file for the in-sandbox runtime.
//
//   node scripts/bundle.mjs                       -> dist/envd.mjs
//   node scripts/bundle.mjs --outfile <file>      -> <file>
//   node scripts/bundle.mjs --native-dir <dir>    -> also copies the native packages into <dir>/<name>
//
// The native packages (node-pty, fs-xattr) stay external: esbuild cannot inline `.node` addons, so
// they are copied next to the bundle with only the files that run (JS + build/Release/*.node).
import { build } from 'esbuild';
import { cpSync, existsSync, mkdirSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const envdRoot = resolve(here, '..');

/** Packages with compiled addons that must stay out of the bundle. */
export const NATIVE_PACKAGES = ['node-pty', 'fs-xattr'];

function parseArgs(argv) {
  const out = { outfile: join(envdRoot, 'dist', 'envd.mjs'), nativeDir: undefined, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return resolve(v);
    };
    if (arg === '--outfile') out.outfile = value();
    else if (arg === '--native-dir') out.nativeDir = value();
    else if (arg === '--quiet') out.quiet = true;
    else throw new Error(`unknown argument '${arg}' (expected --outfile <file>, --native-dir <dir>, --quiet)`);
  }
  return out;
}

// Banner: bundled CommonJS dependencies call require/__dirname; give them ESM-safe equivalents.
const BANNER = [
  "import { createRequire as __tpCreateRequire } from 'node:module';",
  "import { fileURLToPath as __tpFileURLToPath } from 'node:url';",
  "import { dirname as __tpDirname } from 'node:path';",
  'const require = __tpCreateRequire(import.meta.url);',
  'const __filename = __tpFileURLToPath(import.meta.url);',
  'const __dirname = __tpDirname(__filename);',
].join('\n');

async function bundle(outfile) {
  mkdirSync(dirname(outfile), { recursive: true });
  const result = await build({
    entryPoints: [join(envdRoot, 'src', 'main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: NATIVE_PACKAGES,
    banner: { js: BANNER },
    legalComments: 'none',
    sourcemap: false,
    minify: false,
    logLevel: 'warning',
    metafile: true,
  });
  return result;
}

/** Keeps what runs: package.json, top-level and lib/ JavaScript, build/Release/*.node. No tests, maps, typings, sources. */
function shouldCopy(pkgRoot, src) {
  const rel = relative(pkgRoot, src);
  if (rel === '') return true;
  if (statSync(src).isDirectory()) return rel === 'build' || rel === 'build/Release' || rel === 'lib' || rel.startsWith('lib/');
  if (rel === 'package.json' || rel === 'LICENSE') return true;
  if (rel.startsWith('build/Release/')) return rel.endsWith('.node') && !rel.slice('build/Release/'.length).includes('/');
  if (rel.endsWith('.map') || rel.endsWith('.test.js')) return false;
  if (rel.startsWith('lib/')) return rel.endsWith('.js');
  return !rel.includes('/') && rel.endsWith('.js');
}

function copyNative(nativeDir) {
  rmSync(nativeDir, { recursive: true, force: true });
  mkdirSync(nativeDir, { recursive: true });
  for (const name of NATIVE_PACKAGES) {
    const link = join(envdRoot, 'node_modules', name);
    if (!existsSync(link)) throw new Error(`${name} is not installed in apps/envd/node_modules; run pnpm install`);
    const pkgRoot = realpathSync(link);
    const addons = existsSync(join(pkgRoot, 'build', 'Release'))
      ? readdirSync(join(pkgRoot, 'build', 'Release')).filter((f) => f.endsWith('.node'))
      : [];
    if (addons.length === 0) throw new Error(`${name} has no compiled addon in ${pkgRoot}/build/Release; run pnpm rebuild ${name}`);
    cpSync(pkgRoot, join(nativeDir, name), { recursive: true, dereference: true, filter: (src) => shouldCopy(pkgRoot, src) });
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const result = await bundle(args.outfile);
  if (args.nativeDir) copyNative(args.nativeDir);
  // Record which packages ended up inside (handy when auditing the image).
  const inputs = Object.keys(result.metafile.inputs).filter((p) => p.includes('node_modules/'));
  const pkgs = [...new Set(inputs.map((p) => p.replace(/^.*node_modules\/(@[^/]+\/[^/]+|[^/]+).*$/, '$1')))].sort();
  writeFileSync(`${args.outfile}.packages.txt`, `${pkgs.join('\n')}\n`);
  if (!args.quiet) {
    const size = readFileSync(args.outfile).length;
    process.stderr.write(`envd bundle: ${relative(process.cwd(), args.outfile)} (${(size / 1024).toFixed(0)} KiB, ${pkgs.length} packages inlined)\n`);
  }
}

main().catch((error) => {
  process.stderr.write(`bundle failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

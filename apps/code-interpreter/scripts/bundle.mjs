#!/usr/bin/env node
// Bundles the code-interpreter server for the sandbox image: one directory with
//   server.mjs        src/main.ts, run by the envd runtime's Node (/opt/tidepool/bin/node)
//   js-worker.mjs     src/worker/js-worker.ts (one per JavaScript/TypeScript context; TypeScript inlined)
//   kernel_bridge.py  python/kernel_bridge.py (one process per Python context, its kernel inside; the image's python3)
//   kernel_setup.py   python/kernel_setup.py, python/_tidepool_charts.py
//
//   node scripts/bundle.mjs [--outdir <dir>]      (default: dist/)
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
let outdir = join(root, 'dist');
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--outdir' && args[i + 1]) outdir = resolve(args[++i]);
  else throw new Error(`unknown argument '${args[i]}' (expected --outdir <dir>)`);
}

const BANNER = [
  "import { createRequire as __tpCreateRequire } from 'node:module';",
  "import { fileURLToPath as __tpFileURLToPath } from 'node:url';",
  "import { dirname as __tpDirname } from 'node:path';",
  'const require = __tpCreateRequire(import.meta.url);',
  'const __filename = __tpFileURLToPath(import.meta.url);',
  'const __dirname = __tpDirname(__filename);',
].join('\n');

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: { server: join(root, 'src', 'main.ts'), 'js-worker': join(root, 'src', 'worker', 'js-worker.ts') },
  outdir,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  banner: { js: BANNER },
  legalComments: 'none',
  logLevel: 'warning',
});
for (const file of readdirSync(join(root, 'python'))) {
  if (file.endsWith('.py')) copyFileSync(join(root, 'python', file), join(outdir, file));
}
process.stderr.write(`code-interpreter bundle: ${outdir}\n`);

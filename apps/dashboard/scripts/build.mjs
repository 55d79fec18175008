// Builds the dashboard into dist/: one bundled script (esbuild), the page, its styles and xterm.js's
// stylesheet, all served by the API at /dashboard. Nothing is loaded from anywhere else.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const require = createRequire(join(root, 'package.json'));

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await build({
  entryPoints: [join(root, 'src/main.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  minify: true,
  sourcemap: true,
  legalComments: 'eof',
  outfile: join(dist, 'app.js'),
  logLevel: 'warning',
});
copyFileSync(join(root, 'src/index.html'), join(dist, 'index.html'));
copyFileSync(join(root, 'src/styles.css'), join(dist, 'styles.css'));
copyFileSync(require.resolve('@xterm/xterm/css/xterm.css'), join(dist, 'xterm.css'));
process.stdout.write(`dashboard built into ${dist}\n`);

// `npm run build`: the WebAssembly kernels (scripts/build-wasm.mjs: three asc variants in
// parallel, each skipped when its inputs did not change), and beside them the TypeScript
// (tsc → dist/) followed by the web UI (type check + esbuild → build/webui/). The two lines
// share no outputs, so they run at once; the build fails if either does.
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const require = createRequire(join(root, 'package.json'));
const tsc = join(require.resolve('typescript/package.json'), '..', 'bin', 'tsc');

/** Runs node with `args` in the repository root; resolves to its exit code. */
function node(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: 'inherit' });
    child.on('close', (code) => resolve(code ?? 1));
  });
}

async function steps(label, list) {
  const started = Date.now();
  for (const args of list) {
    const code = await node(args);
    if (code !== 0) {
      console.error(`build: ${label}: \`node ${args.join(' ')}\` exited with ${code}`);
      return code;
    }
  }
  console.log(`build: ${label} done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return 0;
}

const started = Date.now();
const codes = await Promise.all([
  steps('wasm kernels', [['scripts/build-wasm.mjs']]),
  steps('typescript and web UI', [[tsc, '-p', 'tsconfig.json'], [tsc, '-p', 'webui/tsconfig.json'], ['scripts/build-webui.mjs']]),
]);
const failed = codes.some((c) => c !== 0);
console.log(`build: ${failed ? 'FAILED' : 'done'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);

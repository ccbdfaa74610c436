// Starts `deltaserve serve` (the built dist/) as a child process on a free port, for the bench
// scripts that measure a live server. Resolves with its URL once it prints its serving line.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** `root`: the repository; `args`: serve's flags after the defaults (model, wasm, port 0, quiet). */
export function spawnServe(root, model, args) {
  const argv = [join(root, 'dist', 'src', 'cli', 'main.js'), 'serve', '--model', model, '--kernels', 'wasm',
    '--port', '0', '--log-level', 'warn', '--no-prefix-cache', ...args];
  const proc = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /serving \S+ at (http:\/\/\S+)\/v1/.exec(out);
      if (m) res({ url: m[1], proc });
    });
    proc.on('exit', (code) => rej(new Error(`serve exited ${code}: ${out}`)));
  });
}

// The npm package as a user gets it: `npm pack`, then `npm install ./deltaserve-*.tgz` in an
// empty directory, offline (the tarball's dependencies come from the repository's installed
// node_modules, as `npm ci` put them). The installed `npx deltaserve` must use the
// WebAssembly kernels and serve the built-in model; the tarball carries the whitelisted
// files only; a missing .wasm is one line saying what is missing and how to get it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

/** The environment of a user's shell: no test-only overrides of the kernel choice. */
function userEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['DELTASERVE_KERNELS'];
  delete env['DELTASERVE_WASM_FMA'];
  return env;
}

function run(cmd: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: userEnv(), timeout: 180_000 });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')} could not run: ${r.error.message}`);
  return r;
}

/** Production dependencies installed at the repository root (package-lock.json), as
 * `file:` specs so that npm installs them without the network. */
function installedDependencies(): Record<string, string> {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const deps: Record<string, string> = {};
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.startsWith('node_modules/') || entry.dev || path.lastIndexOf('node_modules/') !== 0) continue;
    const dir = join(REPO_ROOT, path);
    if (!existsSync(dir)) throw new Error(`${dir} is missing: run npm ci first`);
    deps[path.slice('node_modules/'.length)] = `file:${dir}`;
  }
  return deps;
}

interface PackedFile { path: string }

test('npm pack → npm install (offline) → npx deltaserve serves the built-in model on the wasm kernels', { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pack = run('npm', ['pack', '--json', '--pack-destination', dir], REPO_ROOT);
  assert.equal(pack.status, 0, pack.stderr);
  const [info] = JSON.parse(pack.stdout) as { filename: string; files: PackedFile[] }[];
  const files = info!.files.map((f) => f.path);
  for (const want of ['build/kernels.wasm', 'build/kernels-fma.wasm', 'build/kernels-vnni.wasm', 'models/tiny-think/model.safetensors', 'models/tiny-think/tokenizer.json',
    'LICENSE', 'README.md', 'package.json', 'dist/src/cli/main.js', 'dist/src/index.d.ts', 'build/webui/index.html',
    'build/webui/dashboard.html', 'build/webui/assets/favicon.svg']) {
    assert.ok(files.includes(want), `the tarball has ${want}`);
  }
  const stray = files.filter((f) => !/^(dist\/src\/|build\/kernels(-fma|-vnni)?\.wasm$|build\/webui\/|models\/tiny-think\/|LICENSE$|README\.md$|package\.json$)/.test(f) || f.endsWith('.map'));
  assert.deepEqual(stray, [], 'only whitelisted files (no tests, sources, .ci, maps)');

  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, dependencies: installedDependencies() }));
  const install = run('npm', ['install', '--offline', '--install-links', '--no-audit', '--no-fund', join(dir, info!.filename)], app);
  assert.equal(install.status, 0, `npm install of the tarball failed:\n${install.stderr}`);

  // Its own process group: npx runs the bin in a child, and signals must reach both.
  const proc = spawn('npx', ['--no-install', 'deltaserve', 'serve', '--port', '0', '--log-level', 'warn'],
    { cwd: app, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const signalGroup = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-proc.pid!, sig);
    } catch {
      // already gone
    }
  };
  let stdout = '';
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  t.after(() => signalGroup('SIGKILL'));
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /serving tiny-think at (http:\/\/127\.0\.0\.1:\d+)\/v1\n[^\n]*\n/.exec(stdout);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`npx deltaserve serve exited (${code}) before it was ready:\n${stdout}\n${stderr}`)));
  });
  assert.match(stdout, /kernels wasm/, 'the installed package uses the WebAssembly kernels');
  const version = (await (await fetch(`${url}/version`)).json()) as { kernels: string };
  assert.equal(version.kernels, 'wasm');
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'What is 12 + 30?' }], max_tokens: 64 }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { choices: { message: { content: string; reasoning_content: string | null } }[] };
  assert.ok(body.choices[0]!.message.reasoning_content!.length > 0, 'the built-in tiny-think model reasons');
  // the web UI ships in the tarball: the chat page and the bundles it names are served
  const page = await fetch(`${url}/`);
  assert.equal(page.status, 200);
  const html = await page.text();
  const bundles = [...html.matchAll(/(?:src|href)="(\/webui\/[^"]+)"/g)].map((m) => m[1]!);
  assert.ok(bundles.length >= 3, `the page names its script, stylesheet and icon (${bundles.join(', ')})`);
  for (const b of bundles) assert.equal((await fetch(`${url}${b}`)).status, 200, b);
  signalGroup('SIGTERM');
  await exited;
  for (let i = 0; i < 100 && (await fetch(`${url}/health`).then(() => true, () => false)); i++) await new Promise((r) => setTimeout(r, 100));
  await assert.rejects(fetch(`${url}/health`), 'the server stopped on SIGTERM');

  // The .wasm genuinely missing: one line naming the file and how to get it, exit 2.
  const installed = join(app, 'node_modules', 'deltaserve');
  rmSync(join(installed, 'build'), { recursive: true });
  const r = run('npx', ['--no-install', 'deltaserve', 'generate', '--prompt', 'hi', '--kernels', 'wasm'], app);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(r.stderr, /WebAssembly kernels are missing: .*build\/kernels(-fma)?\.wasm does not exist.*npm run build.*reinstall/);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
});

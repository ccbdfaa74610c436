// The npm package as a user gets it: `npm pack`, then `npm install ./deltaserve-*.tgz` in an
// empty directory, offline (the tarball's dependencies come from the repository's installed
// node_modules, as `npm ci` put them). The installed `npx deltaserve` must use the
// WebAssembly kernels and serve the built-in model; the tarball carries the whitelisted
// files only; a missing .wasm is one line saying what is missing and how to get it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installInto, pack, run, serveInstalled } from './package-helpers.js';

test('npm pack → npm install (offline) → npx deltaserve serves the built-in model on the wasm kernels', { timeout: 300_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-pack-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { tarball, files } = pack(dir);
  for (const want of ['build/kernels.wasm', 'build/kernels-fma.wasm', 'build/kernels-vnni.wasm', 'models/tiny-think/model.safetensors', 'models/tiny-think/tokenizer.json',
    'LICENSE', 'README.md', 'package.json', 'dist/src/cli/main.js', 'dist/src/index.d.ts', 'build/webui/index.html',
    'build/webui/dashboard.html', 'build/webui/assets/favicon.svg']) {
    assert.ok(files.includes(want), `the tarball has ${want}`);
  }
  const stray = files.filter((f) => !/^(dist\/src\/|build\/kernels(-fma|-vnni)?\.wasm$|build\/webui\/|models\/tiny-think\/|LICENSE$|README\.md$|package\.json$)/.test(f) || f.endsWith('.map'));
  assert.deepEqual(stray, [], 'only whitelisted files (no tests, sources, .ci, maps)');

  const app = join(dir, 'app');
  installInto(app, tarball);

  const server = await serveInstalled(app);
  t.after(() => server.signal('SIGKILL'));
  const { url } = server;
  assert.match(server.stdout(), /kernels wasm/, 'the installed package uses the WebAssembly kernels');
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
  server.signal('SIGTERM');
  await server.exited;
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

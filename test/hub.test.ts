// Models by name, against a loopback test double of the hub's HTTP interface
// (revision API + resolve URLs with Range): download into the HF cache layout, second run
// from the cache without the server, resume of a partial download, sha256 checks, GGUF
// quant selection, and offline errors naming the missing file and where they looked.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { resolveModelPath, parseRepoRef } from '../src/hub/resolve.js';
import { makeModel } from '../src/tools/make-model.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-hub-'));
const COMMIT = 'a'.repeat(40);
const REPO = 'TestOrg/Tiny-Release';
const GGUF_REPO = 'TestOrg/Tiny-GGUF';

interface Served { readonly body: Buffer; readonly lfs: boolean }
const repos = new Map<string, Map<string, Served>>();
const log: { path: string; range?: string }[] = [];
let corrupt: string | null = null;
let server: Server;
let endpoint = '';

function sha(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** A test double of the hub: the revision API and resolve URLs (Range → 206). */
function startHub(): Promise<void> {
  server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    log.push({ path: url.pathname, ...(req.headers.range ? { range: req.headers.range } : {}) });
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (api) {
      const files = repos.get(api[1]!);
      if (!files) return void res.writeHead(404).end('{"error":"Repository not found"}');
      const siblings = [...files].map(([rfilename, f]) => ({ rfilename, size: f.body.length,
        ...(f.lfs ? { lfs: { sha256: sha(f.body), size: f.body.length } } : {}) }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: api[1], sha: COMMIT, siblings }));
      return;
    }
    const m = /^\/([^/]+\/[^/]+)\/resolve\/([0-9a-f]{40})\/(.+)$/.exec(url.pathname);
    const f = m && repos.get(m[1]!)?.get(decodeURIComponent(m[3]!));
    if (!m || !f) return void res.writeHead(404).end('Entry not found');
    let body = f.body;
    if (corrupt === m[3]) body = Buffer.concat([body.subarray(0, body.length - 1), Buffer.from([body[body.length - 1]! ^ 1])]);
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const headers = { 'x-repo-commit': COMMIT, etag: `"${sha(f.body)}"` };
    if (range) {
      const from = Number(range[1]);
      res.writeHead(206, { ...headers, 'content-range': `bytes ${from}-${body.length - 1}/${body.length}` }).end(body.subarray(from));
    } else res.writeHead(200, headers).end(body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    resolve();
  }));
}

before(async () => {
  const src = join(ROOT, 'src');
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 2, out: src, tokenizer: TINY_THINK(), layout: 'release', shardBytes: 1 << 20 });
  const files = new Map<string, Served>();
  for (const f of readdirSync(src)) files.set(f, { body: readFileSync(join(src, f)), lfs: f.endsWith('.safetensors') });
  files.set('README.md', { body: Buffer.from('# not needed'), lfs: false });
  files.set('original/consolidated.pth', { body: Buffer.from('not needed either'), lfs: true });
  repos.set(REPO, files);
  const gguf = new Map<string, Served>();
  for (const q of ['Q4_K_M', 'Q8_0', 'Q4_K_S']) gguf.set(`Tiny-${q}.gguf`, { body: Buffer.from(`GGUF ${q} `.repeat(100)), lfs: true });
  gguf.set('mmproj-Tiny-Q4_K_M.gguf', { body: Buffer.from('projector'), lfs: true });
  repos.set(GGUF_REPO, gguf);
  await startHub();
});
after(() => {
  server?.close();
  rmSync(ROOT, { recursive: true, force: true });
});

const quiet = (): void => {};
const envFor = (home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({ HF_HOME: home, HF_ENDPOINT: endpoint, ...extra });

test('repo references parse; paths and .gguf files are not repo ids', () => {
  assert.deepEqual(parseRepoRef('Qwen/Qwen3.5-0.8B'), { org: 'Qwen', name: 'Qwen3.5-0.8B', revision: 'main', quant: null });
  assert.deepEqual(parseRepoRef('unsloth/Qwen3.5-4B-GGUF:Q4_K_M'), { org: 'unsloth', name: 'Qwen3.5-4B-GGUF', revision: 'main', quant: 'Q4_K_M' });
  assert.equal(parseRepoRef('Qwen/Qwen3.5-0.8B@v1.0')?.revision, 'v1.0');
  assert.equal(parseRepoRef('/abs/path'), null);
  assert.equal(parseRepoRef('a/b/c'), null);
  assert.equal(parseRepoRef('dir/model.gguf'), null);
});

test('download by name fills the HF cache layout; the second run uses the cache without the server', async () => {
  const home = join(ROOT, 'home1');
  log.length = 0;
  const dir = await resolveModelPath(REPO, { env: envFor(home), log: quiet });
  const repoDir = join(home, 'hub', 'models--TestOrg--Tiny-Release');
  assert.equal(dir, join(repoDir, 'snapshots', COMMIT));
  assert.equal(readFileSync(join(repoDir, 'refs', 'main'), 'utf8'), COMMIT);
  const shard = readdirSync(dir).find((f) => f.endsWith('.safetensors'))!;
  assert.ok(lstatSync(join(dir, shard)).isSymbolicLink());
  assert.match(readlinkSync(join(dir, shard)), /^\.\.\/\.\.\/blobs\/[0-9a-f]{64}$/);
  assert.ok(existsSync(join(dir, 'chat_template.jinja')) && existsSync(join(dir, 'model.safetensors.index.json')));
  assert.ok(!existsSync(join(dir, 'README.md')) && !existsSync(join(dir, 'original')), 'only the files deltaserve needs');
  assert.ok(log.some((l) => l.path.startsWith('/api/models/TestOrg/Tiny-Release/revision/main')));
  // second run: cache only (an unreachable endpoint and HF_HUB_OFFLINE both work)
  log.length = 0;
  assert.equal(await resolveModelPath(REPO, { env: envFor(home, { HF_ENDPOINT: 'http://127.0.0.1:9' }), log: quiet }), dir);
  assert.equal(await resolveModelPath(`${REPO}@${COMMIT}`, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet }), dir);
  assert.equal(log.length, 0, 'no request on a cache hit');
  // and the engine runs from it by name
  const saved = { home: process.env['HF_HOME'], offline: process.env['HF_HUB_OFFLINE'] };
  process.env['HF_HOME'] = home;
  process.env['HF_HUB_OFFLINE'] = '1';
  try {
    const out = await withEngine({ model: REPO, maxRunning: 1 }, async (e) => (await e.complete({ promptIds: [5, 6, 7], maxTokens: 4 })).outputIds);
    assert.equal(out.length, 4);
  } finally {
    for (const [k, v] of [['HF_HOME', saved.home], ['HF_HUB_OFFLINE', saved.offline]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('offline or unreachable with an empty cache: the error names the missing file and where it looked', async () => {
  const home = join(ROOT, 'home-empty');
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet }),
    (e: Error) => /HF_HUB_OFFLINE is set: missing refs\/main \(looked in .*models--TestOrg--Tiny-Release\)/.test(e.message));
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home, { HF_ENDPOINT: 'http://127.0.0.1:9' }), log: quiet }),
    (e: Error) => /cannot reach http:\/\/127\.0\.0\.1:9 .*missing refs\/main/.test(e.message));
  // a snapshot with a shard deleted: that shard is named
  const home2 = join(ROOT, 'home2');
  const dir = await resolveModelPath(REPO, { env: envFor(home2), log: quiet });
  const shard = readdirSync(dir).find((f) => f.endsWith('.safetensors'))!;
  rmSync(join(dir, shard));
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home2, { HF_HUB_OFFLINE: 'true' }), log: quiet }),
    (e: Error) => e.message.includes(`missing ${shard} (looked in ${dir})`));
  await assert.rejects(resolveModelPath('TestOrg/Nope', { env: envFor(home2), log: quiet }), /404/);
});

test('a partial download resumes with a Range request; a corrupt one fails its sha256 check', async () => {
  const home = join(ROOT, 'home3');
  const files = repos.get(REPO)!;
  const [name, big] = [...files].filter(([, f]) => f.lfs && f.body.length > 1000)[0]!;
  const blobs = join(home, 'hub', 'models--TestOrg--Tiny-Release', 'blobs');
  mkdirSync(blobs, { recursive: true });
  const half = Math.floor(big.body.length / 2);
  writeFileSync(join(blobs, `${sha(big.body)}.incomplete`), big.body.subarray(0, half));
  log.length = 0;
  const dir = await resolveModelPath(REPO, { env: envFor(home), log: quiet });
  assert.ok(readFileSync(join(dir, name)).equals(big.body), 'resumed file is complete and exact');
  assert.ok(log.some((l) => l.path.endsWith(`/${name}`) && l.range === `bytes=${half}-`), 'resumed with a Range request');
  corrupt = name;
  try {
    await assert.rejects(resolveModelPath(REPO, { env: envFor(join(ROOT, 'home4')), log: quiet }),
      (e: Error) => new RegExp(`${name.replace(/\./g, '\\.')}: sha256 [0-9a-f]{64} does not match`).test(e.message));
  } finally {
    corrupt = null;
  }
});

test('GGUF repos: org/name:QUANT picks the file of that quantization', async () => {
  const home = join(ROOT, 'home5');
  const path = await resolveModelPath(`${GGUF_REPO}:Q4_K_M`, { env: envFor(home), log: quiet });
  assert.ok(path.endsWith('/Tiny-Q4_K_M.gguf'));
  assert.ok(readFileSync(path, 'utf8').startsWith('GGUF Q4_K_M'));
  const snap = join(home, 'hub', 'models--TestOrg--Tiny-GGUF', 'snapshots', COMMIT);
  assert.deepEqual(readdirSync(snap), ['Tiny-Q4_K_M.gguf'], 'only the chosen quantization');
  assert.equal(await resolveModelPath(`${GGUF_REPO}:q4_k_m`, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet }), path);
  await assert.rejects(resolveModelPath(`${GGUF_REPO}:Q2_K`, { env: envFor(home), log: quiet }), /no \.gguf file matches "Q2_K" \(files: .*Tiny-Q8_0\.gguf/);
});

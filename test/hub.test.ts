// Models by name, against a loopback test double of the hub's HTTP interface
// (revision API + resolve URLs with Range): download into the HF cache layout, second run
// from the cache without the server, resume of a partial download, sha256 checks, GGUF
// quant selection (split files, the vision projector beside), and offline errors naming the
// missing file and where they looked; the size before a download and its progress (a TTY
// line redrawn, occasional lines into a pipe); `deltaserve pull` and `deltaserve list`.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { resolveModelPath, parseRepoRef } from '../src/hub/resolve.js';
import { downloadProgress } from '../src/hub/progress.js';
import { quantTagOf } from '../src/hub/list.js';
import { readRecords } from '../src/hub/record.js';
import { makeModel } from '../src/tools/make-model.js';
import { withEngine } from './engine-helpers.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-hub-'));
const COMMIT = 'a'.repeat(40);
const REPO = 'TestOrg/Tiny-Release';
const GGUF_REPO = 'TestOrg/Tiny-GGUF';
const SPLIT_REPO = 'TestOrg/Split-GGUF';

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
  const split = new Map<string, Served>();
  for (const part of [1, 2]) {
    split.set(`Q4_K_M/Split-Q4_K_M-0000${part}-of-00002.gguf`, { body: Buffer.from(`part ${part} `.repeat(2000)), lfs: true });
  }
  split.set('Split-IQ4_K_M.gguf', { body: Buffer.from('not this one'), lfs: true });
  split.set('Split-Q8_0.gguf', { body: Buffer.from('nor this'), lfs: true });
  split.set('mmproj-F32.gguf', { body: Buffer.from('projector f32 '.repeat(20)), lfs: true });
  split.set('mmproj-F16.gguf', { body: Buffer.from('projector f16 '.repeat(10)), lfs: true });
  split.set('README.md', { body: Buffer.from('# readme'), lfs: false });
  repos.set(SPLIT_REPO, split);
  await startHub();
});
after(() => {
  server?.close();
  rmSync(ROOT, { recursive: true, force: true });
});

const quiet = (): void => {};
/** Progress of the downloads of tests that do not look at it. */
const mute = { write: (): void => {} };
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
  const dir = await resolveModelPath(REPO, { env: envFor(home), log: quiet, progress: mute });
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
  assert.equal(await resolveModelPath(REPO, { env: envFor(home, { HF_ENDPOINT: 'http://127.0.0.1:9' }), log: quiet, progress: mute }), dir);
  assert.equal(await resolveModelPath(`${REPO}@${COMMIT}`, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet, progress: mute }), dir);
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
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet, progress: mute }),
    (e: Error) => /HF_HUB_OFFLINE is set: missing refs\/main \(looked in .*models--TestOrg--Tiny-Release\)/.test(e.message));
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home, { HF_ENDPOINT: 'http://127.0.0.1:9' }), log: quiet, progress: mute }),
    (e: Error) => /cannot reach http:\/\/127\.0\.0\.1:9 .*missing refs\/main/.test(e.message));
  // a snapshot with a shard deleted: that shard is named
  const home2 = join(ROOT, 'home2');
  const dir = await resolveModelPath(REPO, { env: envFor(home2), log: quiet, progress: mute });
  const shard = readdirSync(dir).find((f) => f.endsWith('.safetensors'))!;
  rmSync(join(dir, shard));
  await assert.rejects(resolveModelPath(REPO, { env: envFor(home2, { HF_HUB_OFFLINE: 'true' }), log: quiet, progress: mute }),
    (e: Error) => e.message.includes(`missing ${shard} (looked in ${dir})`));
  await assert.rejects(resolveModelPath('TestOrg/Nope', { env: envFor(home2), log: quiet, progress: mute }), /404/);
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
  const dir = await resolveModelPath(REPO, { env: envFor(home), log: quiet, progress: mute });
  assert.ok(readFileSync(join(dir, name)).equals(big.body), 'resumed file is complete and exact');
  assert.ok(log.some((l) => l.path.endsWith(`/${name}`) && l.range === `bytes=${half}-`), 'resumed with a Range request');
  corrupt = name;
  try {
    await assert.rejects(resolveModelPath(REPO, { env: envFor(join(ROOT, 'home4')), log: quiet, progress: mute }),
      (e: Error) => new RegExp(`${name.replace(/\./g, '\\.')}: sha256 [0-9a-f]{64} does not match`).test(e.message));
  } finally {
    corrupt = null;
  }
});

test('GGUF repos: org/name:QUANT picks the file of that quantization', async () => {
  const home = join(ROOT, 'home5');
  const path = await resolveModelPath(`${GGUF_REPO}:Q4_K_M`, { env: envFor(home), log: quiet, progress: mute });
  assert.ok(path.endsWith('/Tiny-Q4_K_M.gguf'));
  assert.ok(readFileSync(path, 'utf8').startsWith('GGUF Q4_K_M'));
  const snap = join(home, 'hub', 'models--TestOrg--Tiny-GGUF', 'snapshots', COMMIT);
  assert.deepEqual(readdirSync(snap).sort(), ['Tiny-Q4_K_M.gguf', 'mmproj-Tiny-Q4_K_M.gguf'], 'only the chosen quantization, and the projector');
  assert.equal(await resolveModelPath(`${GGUF_REPO}:q4_k_m`, { env: envFor(home, { HF_HUB_OFFLINE: '1' }), log: quiet, progress: mute }), path);
  await assert.rejects(resolveModelPath(`${GGUF_REPO}:Q2_K`, { env: envFor(home), log: quiet, progress: mute }), /no \.gguf file matches "Q2_K" \(files: .*Tiny-Q8_0\.gguf/);
});

/** A sink that records what a progress display writes. */
function sink(isTTY: boolean): { write: (t: string) => void; isTTY: boolean; text: () => string } {
  let text = '';
  return { write: (t) => void (text += t), isTTY, text: () => text };
}

test('org/name:QUANT takes every part of a split GGUF and the projector, and records them', async () => {
  const home = join(ROOT, 'home-split');
  const notes: string[] = [];
  const out = sink(false);
  const path = await resolveModelPath(`${SPLIT_REPO}:q4_k_m`, { env: envFor(home), log: (l) => notes.push(l), progress: out });
  const repoDir = join(home, 'hub', 'models--TestOrg--Split-GGUF');
  const snap = join(repoDir, 'snapshots', COMMIT);
  assert.equal(path, join(snap, 'Q4_K_M', 'Split-Q4_K_M-00001-of-00002.gguf'), 'the first part is the model path');
  assert.deepEqual(readdirSync(snap).sort(), ['Q4_K_M', 'mmproj-F16.gguf'], 'the F16 projector, not F32, IQ4_K_M or Q8_0');
  assert.deepEqual(readdirSync(join(snap, 'Q4_K_M')).sort(), ['Split-Q4_K_M-00001-of-00002.gguf', 'Split-Q4_K_M-00002-of-00002.gguf']);
  assert.deepEqual(readRecords(repoDir), [{ commit: COMMIT, quant: 'Q4_K_M',
    parts: ['Q4_K_M/Split-Q4_K_M-00001-of-00002.gguf', 'Q4_K_M/Split-Q4_K_M-00002-of-00002.gguf'], mmproj: 'mmproj-F16.gguf' }]);
  // the size before the download: total and each file
  const files = repos.get(SPLIT_REPO)!;
  const total = ['Q4_K_M/Split-Q4_K_M-00001-of-00002.gguf', 'Q4_K_M/Split-Q4_K_M-00002-of-00002.gguf', 'mmproj-F16.gguf']
    .reduce((n, f) => n + files.get(f)!.body.length, 0);
  assert.equal(notes.length, 1);
  assert.match(notes[0]!, new RegExp(`^downloading TestOrg/Split-GGUF:q4_k_m \\(commit a{12}\\): ${(total / 1e3).toFixed(1)} kB in 3 files ` +
    '\\(Q4_K_M/Split-Q4_K_M-00001-of-00002\\.gguf 14\\.0 kB, Q4_K_M/Split-Q4_K_M-00002-of-00002\\.gguf 14\\.0 kB, mmproj-F16\\.gguf 0\\.1 kB\\) ' +
    `from ${endpoint} into ${repoDir}$`));
  // into a pipe: whole lines, no carriage returns, ending at 100%
  assert.doesNotMatch(out.text(), /\r/);
  assert.match(out.text(), new RegExp(`100% ${(total / 1e3).toFixed(1)} kB / ${(total / 1e3).toFixed(1)} kB, .* in \\d+s\\n$`));
  // offline again: from the cache; without the projector or a part, the missing file is named
  const offline = envFor(home, { HF_HUB_OFFLINE: '1' });
  assert.equal(await resolveModelPath(`${SPLIT_REPO}:Q4_K_M`, { env: offline, log: quiet, progress: mute }), path);
  rmSync(join(snap, 'mmproj-F16.gguf'));
  await assert.rejects(resolveModelPath(`${SPLIT_REPO}:Q4_K_M`, { env: offline, log: quiet, progress: mute }), /missing mmproj-F16\.gguf \(looked in /);
  rmSync(join(snap, 'Q4_K_M', 'Split-Q4_K_M-00002-of-00002.gguf'));
  await assert.rejects(resolveModelPath(`${SPLIT_REPO}:Q4_K_M`, { env: offline, log: quiet, progress: mute }), /missing Q4_K_M\/Split-Q4_K_M-00002-of-00002\.gguf/);
  // online, the missing files come back: the projector relinked from its blob, part 2 (blob
  // removed too) fetched again, part 1 untouched
  rmSync(join(repoDir, 'blobs', sha(files.get('Q4_K_M/Split-Q4_K_M-00002-of-00002.gguf')!.body)));
  log.length = 0;
  assert.equal(await resolveModelPath(`${SPLIT_REPO}:Q4_K_M`, { env: envFor(home), log: quiet, progress: mute }), path);
  assert.deepEqual(log.filter((l) => l.path.includes('/resolve/')).map((l) => l.path.split('/').pop()), ['Split-Q4_K_M-00002-of-00002.gguf']);
  assert.ok(existsSync(join(snap, 'mmproj-F16.gguf')) && existsSync(join(snap, 'Q4_K_M', 'Split-Q4_K_M-00002-of-00002.gguf')));
});

test('download progress: a TTY line redrawn at most 10 times a second; a pipe gets a line per 10% at most every 2 s', () => {
  let t = 0;
  const clock = (): number => t;
  const pipe = sink(false);
  const p = downloadProgress('org/x:Q8_0', 1000, pipe, clock);
  p.have(100); // resumed: counted, not timed
  for (let i = 0; i < 90; i++) {
    t += 100; // 10 bytes every 100 ms
    p.add(10);
  }
  p.done();
  const lines = pipe.text().split('\n').filter((l) => l !== '');
  assert.ok(lines.length >= 4 && lines.length <= 7, `a few lines, not one per chunk (${lines.length}):\n${pipe.text()}`);
  assert.match(lines[0]!, /^org\/x:Q8_0  10% 0\.1 kB \/ 1\.0 kB$/, 'the first line: the resumed bytes, no rate yet');
  assert.equal(lines[lines.length - 1], 'org/x:Q8_0 100% 1.0 kB / 1.0 kB, 0.1 kB/s in 9s');
  const tty = sink(true);
  t = 0;
  const q = downloadProgress('org/x:Q8_0', 1000, tty, clock);
  for (let i = 0; i < 100; i++) {
    t += 50;
    q.add(10);
  }
  q.done();
  const draws = tty.text().split('\r').filter((d) => d !== '');
  assert.ok(draws.length >= 45 && draws.length <= 52, `redrawn about every 100 ms (${draws.length})`);
  assert.ok(draws.every((d) => d.endsWith('\x1b[K') || d.endsWith('\x1b[K\n')), 'each draw clears the rest of the line');
  assert.match(draws[draws.length - 1]!, /\[#{24}\] 100% 1\.0 kB \/ 1\.0 kB, 0\.2 kB\/s in 5s\x1b\[K\n$/);
  assert.match(draws[20]!, /\[#+\.+\]  4\d% .*, \ds left/);
});

test('quantization tags of GGUF names', () => {
  for (const [path, tag] of [['Qwen3.5-4B-Q4_K_M.gguf', 'Q4_K_M'], ['BF16/Qwen3.5-4B-BF16-00001-of-00002.gguf', 'BF16'],
    ['Qwen3.5-4B-UD-Q4_K_XL.gguf', 'Q4_K_XL'], ['x-IQ4_XS.gguf', 'IQ4_XS'], ['model.gguf', null], ['Qwen3-8B-f16.gguf', 'F16']] as const) {
    assert.equal(quantTagOf(path), tag, path);
  }
});

/** The CLI in a child process (asynchronous: the hub test double answers from this one). */
function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

test('deltaserve pull downloads without serving; deltaserve list shows the cache with sizes and files', async () => {
  const home = join(ROOT, 'home-cli');
  const env = { HF_HOME: home, HF_ENDPOINT: endpoint };
  const empty = await cli(['list'], env);
  assert.equal(empty.code, 0, empty.stderr);
  assert.match(empty.stdout, /^no models in the Hugging Face cache \(.*home-cli\/hub\); "deltaserve pull ORG\/NAME\[:QUANT\]" downloads one\n$/);
  const pull = await cli(['pull', `${SPLIT_REPO}:Q4_K_M`], env);
  assert.equal(pull.code, 0, pull.stderr);
  const snap = join(home, 'hub', 'models--TestOrg--Split-GGUF', 'snapshots', COMMIT);
  assert.equal(pull.stdout, `${join(snap, 'Q4_K_M', 'Split-Q4_K_M-00001-of-00002.gguf')}\n`);
  const [first, ...rest] = pull.stderr.trim().split('\n');
  assert.match(first!, /^deltaserve: downloading TestOrg\/Split-GGUF:Q4_K_M .*: 28\.1 kB in 3 files/, 'the size comes first');
  assert.match(rest.at(-1)!, /^deltaserve: TestOrg\/Split-GGUF:Q4_K_M downloaded \(28\.1 kB, with projector mmproj-F16\.gguf\)$/);
  assert.ok(rest.some((l) => /100% 28\.1 kB \/ 28\.1 kB/.test(l)), 'progress reached 100%');
  const again = await cli(['pull', `${SPLIT_REPO}:Q4_K_M`], { ...env, HF_HUB_OFFLINE: '1' });
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, pull.stdout);
  assert.match(again.stderr, /is already in the cache \(28\.1 kB/);
  assert.equal((await cli(['pull', REPO], env)).code, 0);
  const list = await cli(['list'], env);
  assert.equal(list.code, 0, list.stderr);
  const lines = list.stdout.trim().split('\n');
  assert.match(lines[0]!, /^NAME +FORMAT +SIZE +FILES$/);
  assert.match(lines[1]!, /^TestOrg\/Split-GGUF:Q4_K_M +Q4_K_M +28\.1 kB +Q4_K_M\/Split-Q4_K_M-00001-of-00002\.gguf \(\+1 parts\) \+ mmproj-F16\.gguf$/);
  assert.match(lines[2]!, /^TestOrg\/Tiny-Release +safetensors +\d+\.\d [kM]B +\d+ files \(\d+ \.safetensors\)$/);
  assert.match(lines[3]!, /^2 models, .* in .*home-cli\/hub$/);
  const json = JSON.parse((await cli(['list', '--json'], env)).stdout) as { name: string; bytes: number; mmproj: { path: string } | null }[];
  assert.deepEqual(json.map((m) => m.name), ['TestOrg/Split-GGUF:Q4_K_M', 'TestOrg/Tiny-Release']);
  assert.equal(json[0]!.mmproj?.path, 'mmproj-F16.gguf');
  assert.equal(json[0]!.bytes, 28_000 + 140);
  const bad = await cli(['pull', './models/nothing'], env);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^deltaserve: pull takes a hub name ORG\/NAME\[@REV\]\[:QUANT\] .*got "\.\/models\/nothing"\n$/);
});

test('local paths are never hub names: an existing one is used, a missing one is an error naming it, no request made', async () => {
  const env = envFor(join(ROOT, 'home-paths'));
  log.length = 0;
  const cwd = process.cwd();
  const scratch = mkdtempSync(join(ROOT, 'cwd-'));
  mkdirSync(join(scratch, 'dir'));
  process.chdir(scratch);
  try {
    await assert.rejects(resolveModelPath('./nope/model', { env, log: quiet, progress: mute }),
      (e: Error) => e.message === `model directory not found: ${join(scratch, 'nope', 'model')} ("./nope/model" from ${scratch})`);
    await assert.rejects(resolveModelPath('/nonexistent/x.gguf', { env, log: quiet, progress: mute }), /^DeltaserveError: model file not found: \/nonexistent\/x\.gguf$/);
    await assert.rejects(resolveModelPath('dir/model', { env, log: quiet, progress: mute }), /model directory not found: .*\/dir\/model/, 'dir/ exists here: a path');
    await assert.rejects(resolveModelPath('models/tiny-think', { env, log: quiet, progress: mute }),
      /model directory not found: .*\/models\/tiny-think .*\(the built-in model: leave the model out, or pass BUILTIN_MODEL from 'deltaserve'\)/);
    assert.deepEqual(log, [], 'no request reached the hub');
    await assert.rejects(resolveModelPath('Org/Name', { env, log: quiet, progress: mute }), /404/, 'org/name with no such directory: a hub name');
    mkdirSync(join(scratch, 'Org', 'Name'), { recursive: true });
    assert.equal(await resolveModelPath('Org/Name', { env, log: quiet, progress: mute }), 'Org/Name', 'an existing directory wins');
  } finally {
    process.chdir(cwd);
  }
});

test('Engine.load() without a model loads the built-in one (BUILTIN_MODEL)', async () => {
  const { BUILTIN_MODEL, Engine } = await import('../src/index.js');
  assert.equal(BUILTIN_MODEL, join(REPO_ROOT, 'models', 'tiny-think'));
  const engine = await Engine.load();
  try {
    const builtin = JSON.parse(readFileSync(join(BUILTIN_MODEL, 'config.json'), 'utf8')) as { hidden_size?: number; text_config?: { hidden_size?: number } };
    assert.equal(engine.model.config.hiddenSize, builtin.hidden_size ?? builtin.text_config?.hidden_size);
    assert.equal((await engine.complete({ prompt: 'hi', maxTokens: 3 })).outputIds.length, 3);
  } finally {
    await engine.close();
  }
});

// The files that hold user input on disk — the prefix cache (KV of prompts) and stored
// Responses — are 0600 in 0700 directories, modes left by older versions fixed; a read-only
// --prefix-cache-dir holding a saved cache is loaded and served with a warning that saves
// are off (never refused, never written). Tests run as root, where a 0555 directory is still
// writable, so the read-only directory is made two ways: a file system that answers EROFS
// to every write (injected, always run), and a real one (chmod 0555 when not root,
// `chattr +i` as root, where the file system allows it), the latter also through
// `deltaserve serve` (Responses then kept in memory).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STORE_FILE } from '../src/cache/prefix-store.js';
import { NODE_IO, type FileIo } from '../src/cache/store-io.js';
import { Engine, type EngineOptions } from '../src/engine/engine.js';
import { checkPrefixCacheDir } from '../src/engine/prefix-persist.js';
import { KEY_FILE, responsesKey } from '../src/server/api/responses-crypto.js';
import { ResponseStore } from '../src/server/api/responses-store.js';
import { TINY_THINK } from './paths.js';
import { spawnServe } from './serve-process.js';
import { KERNELS } from './server-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'ds-cache-access-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(ROOT, `d${dirs++}`);
const modeOf = (p: string): number => statSync(p).mode & 0o777;
const octal = (m: number): string => `0${m.toString(8)}`;

const chat = { messages: [{ role: 'user', content: `Remember:\n${Array.from({ length: 40 }, (_, i) => `- k${i}=${(i * 37) % 1000}`).join('\n')}\nWhat is k3?` }], maxTokens: 4 };

/** Every write answered as a read-only file system would (reads pass through). */
const erofs = (op: string, p: string): Error => Object.assign(new Error(`EROFS: read-only file system, ${op} '${p}'`), { code: 'EROFS' });
const READ_ONLY_IO: FileIo = {
  ...NODE_IO,
  openSync(p, flags, mode) {
    if (flags !== 'r') throw erofs('open', p);
    return NODE_IO.openSync(p, flags, mode);
  },
  mkdirSync(p) { throw erofs('mkdir', p); },
  renameSync(a) { throw erofs('rename', a); },
  unlinkSync(p) { throw erofs('unlink', p); },
};

/** A directory holding a saved prefix cache (one chat's snapshots), and that chat's answer. */
async function savedCache(): Promise<{ dir: string; answer: readonly number[] }> {
  const dir = freshDir();
  const a = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, prefixCacheSaveMs: 0, log: () => undefined });
  const answer = (await a.complete(chat)).outputIds;
  await a.close();
  return { dir, answer };
}

/** Load the saved cache from a read-only `dir`: it is served (a hit, the same answer), a
 * warning says saves are off, and nothing is written (the file is byte for byte the same). */
async function servesReadOnly(dir: string, answer: readonly number[], io?: FileIo): Promise<void> {
  const before = readFileSync(join(dir, STORE_FILE));
  const names = readdirSync(dir).sort();
  const logs: string[] = [];
  const opts: EngineOptions = { model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, prefixCacheSaveMs: 1, log: (m) => logs.push(m) };
  const e = await Engine.load(opts, io ? { prefixCacheIo: io } : {});
  try {
    assert.match(logs.join('\n'), /prefix cache: warning: .* is read-only \(.*\): its saved cache is loaded and served, saves are off/);
    const disk = e.stats().prefixCache!.disk!;
    assert.ok(disk.loads === 1 && disk.loadedSnapshots > 0, JSON.stringify(disk));
    const again = await e.complete(chat);
    assert.ok(again.usage.cachedTokens >= 64, `cached ${again.usage.cachedTokens}`);
    assert.deepEqual(again.outputIds, answer);
    // new snapshots, then idle and close: still no save attempted
    await e.complete({ ...chat, messages: [{ role: 'user', content: 'Something else entirely, long enough to snapshot. '.repeat(4) }] });
  } finally {
    await e.close();
  }
  const disk = e.stats().prefixCache!.disk!;
  assert.equal(disk.saves + disk.saveErrors, 0, JSON.stringify(disk));
  assert.doesNotMatch(logs.join('\n'), /failed/);
  assert.ok(readFileSync(join(dir, STORE_FILE)).equals(before));
  assert.deepEqual(readdirSync(dir).sort(), names);
}

test('a read-only --prefix-cache-dir (EROFS) is loaded and served, with a warning; nothing is written', async () => {
  const { dir, answer } = await savedCache();
  assert.deepEqual(checkPrefixCacheDir(dir, READ_ONLY_IO), { kind: 'read-only', why: `EROFS: read-only file system, open '${join(dir, `.deltaserve-probe-${process.pid}`)}'` });
  await servesReadOnly(dir, answer, READ_ONLY_IO);
  // a read-only directory that does not exist yet has nothing to serve: still an error
  assert.throws(() => checkPrefixCacheDir(join(dir, 'missing'), READ_ONLY_IO), /cannot be used: cannot create .*EROFS/);
});

test('a real read-only directory (chmod 0555, or chattr +i as root) is served the same', async (t) => {
  const { dir, answer } = await savedCache();
  const root = process.getuid?.() === 0;
  if (root) {
    const r = spawnSync('chattr', ['+i', dir], { encoding: 'utf8' });
    if (r.status !== 0) {
      t.diagnostic(`as root without chattr +i here (${(r.stderr || String(r.error)).trim()}): the EROFS test above covers the logic`);
      return;
    }
  } else chmodSync(dir, 0o555);
  try {
    assert.equal(checkPrefixCacheDir(dir).kind, 'read-only');
    await servesReadOnly(dir, answer);
    // `deltaserve serve` starts on it (once refused), warns, answers; Responses stay in memory
    const before = readFileSync(join(dir, STORE_FILE));
    const names = readdirSync(dir).sort();
    const s = await spawnServe(['--prefix-cache-dir', dir]);
    try {
      const r = await fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: chat.messages, max_tokens: 4, store: true }),
      });
      assert.equal(r.status, 200, await r.clone().text());
      const resp = await fetch(`${s.url}/v1/responses`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi', max_output_tokens: 4, store: true }),
      });
      assert.equal(resp.status, 200, await resp.clone().text());
    } finally {
      assert.equal(await s.stop(), 0, s.stderr());
    }
    assert.match(s.stderr(), /prefix cache: warning: .* is read-only .*saves are off/);
    assert.match(s.stderr(), /is read-only: stored Responses are kept in memory only/);
    assert.ok(readFileSync(join(dir, STORE_FILE)).equals(before));
    assert.deepEqual(readdirSync(dir).sort(), names);
  } finally {
    if (root) spawnSync('chattr', ['-i', dir]);
    else chmodSync(dir, 0o700);
  }
});

test('prefix-cache files are 0600; directories the cache creates are 0700', async () => {
  const parent = freshDir();
  const dir = join(parent, 'nested', 'cache');
  const e = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, prefixCacheSaveMs: 0, log: () => undefined });
  await e.complete(chat);
  await e.close();
  assert.ok(e.stats().prefixCache!.disk!.saves >= 1);
  assert.equal(octal(modeOf(join(dir, STORE_FILE))), '0600');
  for (const d of [join(parent, 'nested'), dir]) assert.equal(octal(modeOf(d)), '0700', d);
  // a file written 0644 by an older version is replaced by a 0600 one at the next save
  chmodSync(join(dir, STORE_FILE), 0o644);
  const again = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, prefixCacheSaveMs: 0, log: () => undefined });
  await again.complete({ ...chat, messages: [{ role: 'user', content: 'A different question, long enough to snapshot. '.repeat(4) }] });
  await again.close();
  assert.ok(again.stats().prefixCache!.disk!.saves >= 1);
  assert.equal(octal(modeOf(join(dir, STORE_FILE))), '0600');
});

test('stored Responses and the reasoning key are 0600 in a 0700 directory; older modes are fixed at load', () => {
  const dir = join(freshDir(), 'responses');
  const store = new ResponseStore({ maxBytes: 1 << 20, ttlSeconds: 3600, dir });
  store.put({ id: 'resp_a', response: { id: 'resp_a' }, conversation: [{ type: 'message', role: 'user', content: 'secret' }], storedAt: Date.now() });
  assert.equal(octal(modeOf(dir)), '0700');
  assert.equal(octal(modeOf(join(dir, 'resp_a.json'))), '0600');
  responsesKey(undefined, dir);
  assert.equal(octal(modeOf(join(dir, KEY_FILE))), '0600');
  // what an older version left: a 0755 directory of 0644 files, and a stale 0644 temporary file
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'resp_a.json'), 0o644);
  writeFileSync(join(dir, 'resp_b.json.tmp'), 'partial');
  chmodSync(join(dir, 'resp_b.json.tmp'), 0o644);
  const reopened = new ResponseStore({ maxBytes: 1 << 20, ttlSeconds: 3600, dir });
  assert.equal(reopened.count, 1);
  assert.equal(octal(modeOf(dir)), '0700');
  assert.equal(octal(modeOf(join(dir, 'resp_a.json'))), '0600');
  reopened.put({ id: 'resp_b', response: { id: 'resp_b' }, conversation: [], storedAt: Date.now() });
  assert.equal(octal(modeOf(join(dir, 'resp_b.json'))), '0600');
  assert.equal(readdirSync(dir).filter((n) => n.endsWith('.tmp')).length, 0);
});

// Prefix-cache persistence that cannot lose data, on
// synthetic pools (no model): every fault of the file system — short writes, a full disk,
// failing fsync / rename / open — keeps the previous file byte for byte, leaves no
// temporary file and logs an error; stale temporary files are removed at start; an
// unusable --prefix-cache-dir is a clear error at once; a save yields to the event loop
// (it is copied in slices and written by a worker thread) and still round-trips.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { RadixCache } from '../src/cache/radix-cache.js';
import { STORE_FILE } from '../src/cache/prefix-store.js';
import { NODE_IO, type FileIo } from '../src/cache/store-io.js';
import { PrefixPersistence, checkPrefixCacheDir } from '../src/engine/prefix-persist.js';
import type { PrefixContext } from '../src/engine/prefix.js';
import { DeltaserveError } from '../src/util/errors.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'ds-persist-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(ROOT, `d${dirs++}`);

const G = { pageSize: 16, kvDim: 64, layers: 2, mtpLayers: 1, numLinear: 3, convSize: 96, ssmSize: 4096, hidden: 32 };

/** A prefix context over plain-array pools with room for `slots` snapshots. */
function context(slots = 24, pages = 200): PrefixContext<Float32Array> {
  const alloc = (n: number): Float32Array => new Float32Array(n);
  const kv = new KvPool({ numPages: pages, pageSize: G.pageSize, kvDim: G.kvDim, numLayers: G.layers, numMtpLayers: G.mtpLayers, alloc });
  const state = new StatePool({ slots, numLinear: G.numLinear, convSize: G.convSize, ssmSize: G.ssmSize, batchCapacity: 0, maxSteps: 0, alloc });
  return { cache: new RadixCache(kv, state), kv, state, kvDim: G.kvDim, chunk: 64, interval: 64, mtp: true, inserted: 0 };
}

/** Insert a snapshot of `n` random tokens with random KV rows, state and hidden. */
function addSnapshot(ctx: PrefixContext<Float32Array>, rng: Rng, n: number): void {
  const pages = ctx.kv.alloc(Math.ceil(n / G.pageSize))!;
  const rows = G.pageSize * G.kvDim;
  for (const l of [...ctx.kv.layers, ...ctx.kv.mtpLayers]) {
    for (const p of pages) for (let i = 0; i < rows; i++) { l.k[p * rows + i] = rng.next(); l.v[p * rows + i] = rng.next(); }
  }
  const slot = ctx.state.alloc()!;
  for (const v of ctx.state.view(slot)) { v.conv.forEach((_, i) => { v.conv[i] = rng.next(); }); v.ssm.forEach((_, i) => { v.ssm[i] = rng.next(); }); }
  const tokens = Array.from({ length: n }, () => Math.floor(rng.next() * 1000));
  const hidden = Float32Array.from({ length: G.hidden }, () => rng.next());
  if (ctx.cache.insert(tokens, pages, { slot, hidden, chunkedTo: n })) ctx.inserted++;
  ctx.kv.release(pages);
}

/** Every snapshot's tokens, KV rows, state and hidden, for comparing two caches. */
function contents(ctx: PrefixContext<Float32Array>): unknown[] {
  const rows = G.pageSize * G.kvDim;
  return ctx.cache.list().map((s) => ({
    tokens: s.tokens, hidden: [...s.snap.hidden],
    kv: s.pages.map((p) => [...ctx.kv.layers, ...ctx.kv.mtpLayers].map((l) => [...l.k.subarray(p * rows, (p + 1) * rows), ...l.v.subarray(p * rows, (p + 1) * rows)])),
    state: ctx.state.view(s.snap.slot).map((v) => [...v.conv, ...v.ssm]),
  }));
}

function persistence(ctx: PrefixContext, dir: string, logs: string[], io?: FileIo): PrefixPersistence {
  return new PrefixPersistence(ctx, 'test-identity', G.hidden, { dir, maxBytes: 1 << 30, saveMs: 0, ...(io ? { io } : {}) }, (m) => logs.push(m));
}

function filled(seed: number, snapshots: number): PrefixContext<Float32Array> {
  const ctx = context();
  const rng = new Rng(seed);
  for (let i = 0; i < snapshots; i++) addSnapshot(ctx, rng, 40 + 23 * i);
  return ctx;
}

const tmpFiles = (dir: string): string[] => readdirSync(dir).filter((f) => f.includes('.tmp-') || f.includes('probe'));

/** A file system failing as `fault` says, but only for the cache's temporary files. */
function faultyIo(fault: 'enospc' | 'zero-write' | 'halving' | 'fsync' | 'rename' | 'open', budget = 100_000): FileIo {
  const fds = new Set<number>();
  let left = budget;
  const err = (code: string): Error => Object.assign(new Error(`${code}: injected`), { code });
  return {
    ...NODE_IO,
    openSync(p, flags) {
      if (fault === 'open' && p.includes('.tmp-')) throw err('EMFILE');
      const fd = NODE_IO.openSync(p, flags);
      if (p.includes('.tmp-')) fds.add(fd);
      return fd;
    },
    writeSync(fd, buf, off, len, pos) {
      if (!fds.has(fd)) return NODE_IO.writeSync(fd, buf, off, len, pos);
      if (fault === 'halving') return NODE_IO.writeSync(fd, buf, off, Math.ceil(len / 2), pos);
      if (fault === 'enospc' || fault === 'zero-write') {
        if (left === 0) {
          if (fault === 'zero-write') return 0;
          throw err('ENOSPC');
        }
        const n = NODE_IO.writeSync(fd, buf, off, Math.min(len, left), pos); // a short write at the limit
        left -= n;
        return n;
      }
      return NODE_IO.writeSync(fd, buf, off, len, pos);
    },
    fsyncSync(fd) {
      if (fault === 'fsync' && fds.has(fd)) throw err('EIO');
      NODE_IO.fsyncSync(fd);
    },
    renameSync(a, b) {
      if (fault === 'rename') throw err('EACCES');
      NODE_IO.renameSync(a, b);
    },
    closeSync(fd) {
      fds.delete(fd);
      NODE_IO.closeSync(fd);
    },
  };
}

test('a save round-trips through the worker thread, and yields to the event loop while it copies', async () => {
  const dir = freshDir();
  const ctx = filled(1, 12);
  const logs: string[] = [];
  const p = persistence(ctx, dir, logs);
  let turns = 0;
  const tick = setInterval(() => { turns++; }, 0);
  await p.save();
  clearInterval(tick);
  await p.close();
  assert.deepEqual(logs, []);
  assert.equal(p.stats().saves, 1);
  assert.ok(turns > 0, 'timers ran while the save was under way');
  const back = context();
  const q = persistence(back, dir, logs);
  q.load();
  assert.equal(q.stats().loadedSnapshots, 12, logs.join('\n'));
  assert.deepEqual(contents(back), contents(ctx));
  await q.close();
});

for (const fault of ['enospc', 'zero-write', 'fsync', 'rename', 'open'] as const) {
  test(`a failing save (${fault}) keeps the previous file byte for byte, removes its temporary file and logs`, async () => {
    const dir = freshDir();
    const ctx = filled(2, 6);
    const good = persistence(ctx, dir, []);
    await good.close();
    const before = readFileSync(join(dir, STORE_FILE));
    addSnapshot(ctx, new Rng(3), 70); // something new to save
    const logs: string[] = [];
    const bad = persistence(ctx, dir, logs, faultyIo(fault));
    await bad.save();
    assert.equal(bad.stats().saveErrors, 1);
    assert.equal(bad.stats().saves, 0);
    assert.match(logs.join('\n'), /saving to .* failed: .*prefix-cache\.bin\.tmp-\d+: .*\(the previous file is kept\)/);
    assert.ok(readFileSync(join(dir, STORE_FILE)).equals(before), 'the old file is untouched');
    assert.deepEqual(tmpFiles(dir), []);
    await bad.close();
    const back = context();
    const q = persistence(back, dir, []);
    q.load();
    assert.equal(q.stats().loadedSnapshots, 6);
    await q.close();
  });
}

test('a failure in the writer thread (the temporary name is taken by a directory) keeps the old file and logs', async () => {
  const dir = freshDir();
  const ctx = filled(6, 4);
  const first = persistence(ctx, dir, []);
  await first.save();
  const before = readFileSync(join(dir, STORE_FILE));
  addSnapshot(ctx, new Rng(7), 90);
  mkdirSync(join(dir, `${STORE_FILE}.tmp-${process.pid}`));
  const logs: string[] = [];
  const p = new PrefixPersistence(ctx, 'test-identity', G.hidden, { dir, maxBytes: 1 << 30, saveMs: 0 }, (m) => logs.push(m));
  await p.save();
  assert.equal(p.stats().saveErrors, 1);
  assert.match(logs.join('\n'), /saving to .* failed: creating .*prefix-cache\.bin\.tmp-\d+: EISDIR.*\(the previous file is kept\)/);
  assert.ok(readFileSync(join(dir, STORE_FILE)).equals(before));
  rmdirSync(join(dir, `${STORE_FILE}.tmp-${process.pid}`));
  await p.save(); // the next save succeeds
  assert.equal(p.stats().saves, 1);
  await first.close();
  await p.close();
});

test('short writes are continued: a disk that writes half of every request still gets the whole file', async () => {
  const dir = freshDir();
  const ctx = filled(4, 5);
  const logs: string[] = [];
  const p = persistence(ctx, dir, logs, faultyIo('halving'));
  await p.close();
  assert.deepEqual(logs, []);
  const back = context();
  const q = persistence(back, dir, logs);
  q.load();
  assert.deepEqual(contents(back), contents(ctx));
  await q.close();
});

test('stale temporary files (a save killed mid-write) are removed at start; a live process\'s is kept', async () => {
  const dir = freshDir();
  const ctx = filled(5, 2);
  await persistence(ctx, dir, []).close();
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  const deadPid = Number(dead.stdout);
  const stale = [`${STORE_FILE}.tmp-${deadPid}`, `${STORE_FILE}.tmp-${process.pid}`];
  const live = `${STORE_FILE}.tmp-${process.ppid}`;
  for (const f of [...stale, live]) writeFileSync(join(dir, f), 'half a save');
  const logs: string[] = [];
  const p = persistence(context(), dir, logs);
  for (const f of stale) assert.ok(!existsSync(join(dir, f)), `${f} removed`);
  assert.ok(existsSync(join(dir, live)), 'the temporary file of a running process stays');
  assert.equal(logs.filter((l) => /removed prefix-cache\.bin\.tmp-\d+, left by a save that never finished/.test(l)).length, 2, logs.join('\n'));
  p.load();
  assert.equal(p.stats().loadedSnapshots, 2);
  await p.close();
});

test('SIGKILL during a save: the previous file survives whole and the next start removes the temporary file', async () => {
  const dir = freshDir();
  const ctx = filled(8, 3);
  await persistence(ctx, dir, []).close();
  const before = readFileSync(join(dir, STORE_FILE));
  // a child process saving a 128 MiB cache into the same directory, killed mid-save
  const dist = (f: string): string => JSON.stringify(join(REPO_ROOT, 'dist', 'src', f));
  const script = `
    import { KvPool } from ${dist('cache/kv-pool.js')};
    import { StatePool } from ${dist('cache/state-pool.js')};
    import { RadixCache } from ${dist('cache/radix-cache.js')};
    import { PrefixPersistence } from ${dist('engine/prefix-persist.js')};
    const alloc = (n) => new Float32Array(n).fill(1);
    const kv = new KvPool({ numPages: 8, pageSize: 16, kvDim: 8, numLayers: 1, numMtpLayers: 0, alloc });
    const state = new StatePool({ slots: 4, numLinear: 8, convSize: 8, ssmSize: 1 << 20, batchCapacity: 0, maxSteps: 0, alloc });
    const cache = new RadixCache(kv, state);
    const ctx = { cache, kv, state, kvDim: 8, interval: 64, mtp: false, inserted: 0 };
    for (let i = 0; i < 4; i++) {
      const pages = kv.alloc(1);
      cache.insert([i, 1, 2], pages, { slot: state.alloc(), hidden: new Float32Array(4), chunkedTo: 3 });
      ctx.inserted++;
      kv.release(pages);
    }
    const p = new PrefixPersistence(ctx, 'child', 4, { dir: ${JSON.stringify(dir)}, maxBytes: 1 << 30, saveMs: 0 }, () => {});
    for (;;) { ctx.inserted++; await p.save(); }`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
  const tmp = join(dir, `${STORE_FILE}.tmp-${child.pid}`);
  for (let i = 0; i < 6000 && !existsSync(tmp); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(existsSync(tmp), 'the child started a save');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  assert.ok(existsSync(tmp), 'the killed save left its temporary file');
  const onDisk = readFileSync(join(dir, STORE_FILE));
  assert.ok(onDisk.equals(before) || onDisk.length > before.length, 'the file is the old one or a complete new one');
  const logs: string[] = [];
  const p = persistence(context(), dir, logs);
  assert.ok(!existsSync(tmp), 'removed at start');
  assert.match(logs.join('\n'), /removed prefix-cache\.bin\.tmp-\d+, left by a save that never finished/);
  await p.close();
});

test('an unusable --prefix-cache-dir is a clear error at once: a file, under a file, /proc, unwritable and unreadable', () => {
  const file = join(ROOT, 'a-file');
  writeFileSync(file, 'x');
  const fail = (code: string): Error => Object.assign(new Error(`${code}: refused`), { code });
  const probeFails = (code: string, unreadable = false): FileIo => ({
    ...NODE_IO,
    openSync(p, f, m) { if (p.includes('probe')) throw fail(code); return NODE_IO.openSync(p, f, m); },
    readdirSync(p) { if (unreadable) throw fail('EACCES'); return NODE_IO.readdirSync(p); },
  });
  mkdirSync(join(ROOT, 'ro'), { recursive: true });
  const cases: [string, RegExp, FileIo?][] = [
    [file, /a-file is not a directory/],
    [join(file, 'sub'), /a-file is not a directory/],
    ['/proc/deltaserve-test/x', /cannot create \/proc\/deltaserve-test/],
    [join(ROOT, 'ro'), /cannot write files in it \(EIO: refused\)/, probeFails('EIO')],
    [join(ROOT, 'ro'), /cannot write files in it \(EACCES: refused\) nor read it/, probeFails('EACCES', true)],
  ];
  for (const [dir, message, io] of cases) {
    const t0 = performance.now();
    assert.throws(() => checkPrefixCacheDir(dir, io), (e: unknown) => {
      assert.ok(e instanceof DeltaserveError && e.code === 'bad_config', String(e));
      assert.match(e.message, new RegExp(`^--prefix-cache-dir ${dir.replace(/[/.]/g, '\\$&')} cannot be used: `));
      assert.match(e.message, message);
      return true;
    });
    assert.ok(performance.now() - t0 < 1000, `${dir}: answered within a second`);
  }
  // read-only but readable: usable for loading (cache-dir-access.test.ts serves one)
  assert.equal(checkPrefixCacheDir(join(ROOT, 'ro'), probeFails('EACCES')).kind, 'read-only');
  const nested = join(ROOT, 'new', 'nested', 'dir');
  assert.equal(checkPrefixCacheDir(nested).kind, 'writable');
  assert.deepEqual(readdirSync(nested), [], 'created, and the probe removed');
});

test('CLI: serve with an unusable --prefix-cache-dir exits 2 with one line before loading the model', () => {
  const file = join(ROOT, 'cli-file');
  writeFileSync(file, 'x');
  for (const dir of ['/proc/deltaserve-test', file]) {
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'serve', '--port', '0', '--prefix-cache-dir', dir],
      { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 2, `${dir}: ${r.stderr}`);
    assert.match(r.stderr, /^deltaserve: --prefix-cache-dir \S+ cannot be used: .+\n$/);
  }
});

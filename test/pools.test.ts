// Invariant 7 (docs/ARCHITECTURE.md "Invariants"): pools never hand out page 0 / slot 0, ref counts and free
// lists agree, and verify scratch is a private region per batch row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { hostPoolStorage } from '../src/cache/pool-storage.js';
import { Rng } from '../src/util/rng.js';

const alloc = (n: number): Float32Array => new Float32Array(n);

test('KV pool: page 0 reserved, all-or-nothing alloc, ref counting, integrity', () => {
  const kv = new KvPool({ numPages: 9, pageSize: 4, kvDim: 2, numLayers: 2, numMtpLayers: 1, alloc });
  assert.equal(kv.usablePages, 8);
  const a = kv.alloc(5)!;
  assert.ok(!a.includes(0));
  assert.equal(kv.alloc(4), null, 'all or nothing');
  assert.equal(kv.freePages, 3);
  kv.retain(a.slice(0, 2));
  kv.checkIntegrity([...a, ...a.slice(0, 2)]);
  assert.throws(() => kv.checkIntegrity(a), /ref count/);
  kv.release(a);
  assert.equal(kv.freePages, 6);
  kv.release(a.slice(0, 2));
  kv.checkIntegrity([]);
  assert.throws(() => kv.release([a[0]!]), /not owned/);
  assert.equal(kv.pagesFor(9), 3);
});

test('KV pool copyPage copies rows of every layer (incl. MTP)', () => {
  const kv = new KvPool({ numPages: 4, pageSize: 2, kvDim: 3, numLayers: 1, numMtpLayers: 1, alloc });
  const [p, q] = kv.alloc(2)!;
  for (const l of [...kv.layers, ...kv.mtpLayers]) l.k.fill(7, p! * 6, p! * 6 + 6);
  kv.copyPage(q!, p!, 1, 3);
  for (const l of [...kv.layers, ...kv.mtpLayers]) {
    assert.deepEqual([...l.k.subarray(q! * 6, q! * 6 + 6)], [7, 7, 7, 0, 0, 0]);
  }
});

test('state pool: slot 0 never allocated, copy, scratch per batch row, integrity', () => {
  const pool = new StatePool({ slots: 3, numLinear: 2, convSize: 3, ssmSize: 4, batchCapacity: 2, maxSteps: 3, alloc });
  const got = [pool.alloc(), pool.alloc(), pool.alloc()];
  assert.deepEqual([...got].sort(), [1, 2, 3]);
  assert.equal(pool.alloc(), null);
  pool.view(1)[1]!.ssm.set([1, 2, 3, 4]);
  pool.copy(2, 1);
  assert.deepEqual([...pool.view(2)[1]!.ssm], [1, 2, 3, 4]);
  // scratch regions of different rows and layers never overlap
  const r0 = pool.scratch(0, 3);
  const r1 = pool.scratch(1, 3);
  r0.forEach((s) => s.ssm.fill(1));
  r1.forEach((s) => assert.ok(s.ssm.every((x) => x === 0)));
  assert.throws(() => pool.scratch(2, 1), /outside batch capacity/);
  assert.throws(() => pool.scratch(0, 4), /exceeds scratch depth/);
  // poison hits slot 0 and rows ≥ nReal only
  pool.poison(1);
  assert.ok(pool.view(0)[0]!.ssm.every(Number.isNaN));
  assert.ok(pool.scratch(1, 3).every((s) => s.ssm.every(Number.isNaN)));
  assert.ok(pool.scratch(0, 3).every((s) => s.ssm.every((x) => x === 1)));
  assert.ok(pool.view(1)[1]!.ssm.every((x) => !Number.isNaN(x)));
  // stale steps of a real row (≥ the steps it runs this step) are poisoned too
  pool.poison(1, [2]);
  assert.ok(pool.scratch(0, 3).every((s) => s.ssm.subarray(0, 8).every((x) => x === 1) && s.ssm.subarray(8).every(Number.isNaN)));
  assert.throws(() => pool.copy(0, 1), /slot 0/);
  pool.checkIntegrity([1, 2, 3]);
  pool.free(2);
  assert.throws(() => pool.free(2), /not allocated/);
  assert.throws(() => pool.checkIntegrity([1, 2, 3]), /state slot/);
  pool.checkIntegrity([1, 3]);
  assert.throws(() => pool.checkIntegrity([1, 1, 3]), /owned twice/);
});

test('randomized alloc/free keeps both pools consistent', () => {
  const rng = new Rng(3);
  const kv = new KvPool({ numPages: 33, pageSize: 4, kvDim: 1, numLayers: 1, numMtpLayers: 0, alloc });
  const pool = new StatePool({ slots: 6, numLinear: 1, convSize: 1, ssmSize: 1, batchCapacity: 0, maxSteps: 0, alloc });
  const owned: number[][] = [];
  const slots: number[] = [];
  for (let i = 0; i < 2000; i++) {
    if (rng.next() < 0.55) {
      const p = kv.alloc(1 + Math.floor(rng.next() * 5));
      if (p) owned.push(p);
      const s = pool.alloc();
      if (s) slots.push(s);
    } else {
      if (owned.length > 0) kv.release(owned.splice(Math.floor(rng.next() * owned.length), 1)[0]!);
      if (slots.length > 0) pool.free(slots.splice(Math.floor(rng.next() * slots.length), 1)[0]!);
    }
    kv.checkIntegrity(owned.flat());
    pool.checkIntegrity(slots);
  }
});

test('state pool chunks: consecutive slots share one allocation up to maxChunkFloats; the lowest free slot goes first', () => {
  const allocs: Float32Array[] = [];
  const counting = (n: number): Float32Array => { const a = new Float32Array(n); allocs.push(a); return a; };
  // a slot is 2 layers × (3 + 4) = 14 floats: chunks of 2 slots (28 ≤ 30 floats); scratch rows 3 × 14 = 42 floats each, alone
  const pool = new StatePool({ slots: 4, numLinear: 2, convSize: 3, ssmSize: 4, batchCapacity: 2, maxSteps: 3, alloc: counting, maxChunkFloats: 30 });
  assert.equal(allocs.length, 3 + 2, 'slots 0..4 in chunks of 2, 1 scratch row per chunk');
  const mem = (slot: number) => pool.slotTensor(slot).buffer;
  assert.equal(mem(0), mem(1));
  assert.equal(mem(2), mem(3));
  assert.notEqual(mem(1), mem(2));
  // regions of one chunk never overlap: writes to slot 1 leave slot 0 alone
  const a = pool.alloc()!;
  assert.equal(a, 1);
  pool.view(1)[1]!.ssm.fill(5);
  assert.ok(pool.slotTensor(0).every((x) => x === 0));
  assert.deepEqual([pool.alloc(), pool.alloc()], [2, 3]);
  pool.free(2);
  pool.free(1);
  assert.deepEqual([pool.alloc(), pool.alloc(), pool.alloc(), pool.alloc()], [1, 2, 4, null], 'lowest free slot first');
  assert.ok(pool.view(1)[1]!.ssm.every((x) => x === 0), 'a slot is zeroed when handed out');
});

test('state pool: the slots admitted together are zeroed by one fillRuns per chunk, before any access; a copy into a new slot is not zeroed after', () => {
  const fills: { runs: { offset: number; length: number }[]; chunk: number }[] = [];
  const storage = hostPoolStorage();
  const chunks: Float32Array[] = [];
  const counted = {
    ...storage,
    alloc: (n: number) => { const a = new Float32Array(n); chunks.push(a); return a; },
    fill: () => assert.fail('a slot zeroed by its own fill'),
    fillRuns: (dst: Float32Array, runs: readonly { offset: number; length: number }[], v: number) => {
      fills.push({ runs: runs.map((r) => ({ ...r })), chunk: chunks.indexOf(dst) });
      storage.fillRuns(dst, runs, v);
    },
  };
  // a slot is 14 floats; chunks of 4 slots (56 ≤ 60): slots 0..3, 4..7, 8
  const pool = new StatePool({ slots: 8, numLinear: 2, convSize: 3, ssmSize: 4, batchCapacity: 0, maxSteps: 1, storage: counted, maxChunkFloats: 60 });
  const dirty = (s: number): void => void pool.slotTensor(s).fill(9);
  for (let s = 1; s <= 8; s++) dirty(s);
  const first = [pool.alloc(), pool.alloc(), pool.alloc(), pool.alloc(), pool.alloc()];
  assert.deepEqual(first, [1, 2, 3, 4, 5]);
  assert.equal(fills.length, 0, 'alloc records nothing');
  pool.view(1);
  assert.deepEqual(fills, [{ runs: [{ offset: 14, length: 42 }], chunk: 0 }, { runs: [{ offset: 0, length: 28 }], chunk: 1 }],
    'slots 1..3 as one run of chunk 0, 4..5 as one of chunk 1');
  for (const s of first) assert.ok(pool.slotTensor(s!).every((x) => x === 0), `slot ${s} zeroed`);
  // a fragmented admission: slots 2 and 4 free, then handed out again with 6 (not adjacent)
  for (const s of [2, 4]) { dirty(s); pool.free(s); }
  fills.length = 0;
  assert.deepEqual([pool.alloc(), pool.alloc(), pool.alloc()], [2, 4, 6]);
  dirty(7); // an access flushes first: 2, 4 and 6 are zeroed before slot 7 is touched
  assert.deepEqual(fills, [{ runs: [{ offset: 28, length: 14 }], chunk: 0 }, { runs: [{ offset: 0, length: 14 }, { offset: 28, length: 14 }], chunk: 1 }]);
  // a copy into a new slot overwrites it whole: no zeroing afterwards
  dirty(3);
  fills.length = 0;
  const snap = pool.alloc()!;
  assert.equal(snap, 7);
  pool.copy(snap, 3);
  assert.ok(pool.slotTensor(snap).every((x) => x === 9), 'the copy stays');
  assert.equal(fills.length, 0);
  pool.checkIntegrity([1, 2, 3, 4, 5, 6, snap]);
});

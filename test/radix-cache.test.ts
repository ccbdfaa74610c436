// Radix prefix cache: matching up to the deepest snapshot (aligned or tail), edge splits,
// LRU eviction with tombstones, locks, and ownership integrity with the pools.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { RadixCache } from '../src/cache/radix-cache.js';

function setup(pages = 40, slots = 10) {
  const alloc = (n: number): Float32Array => new Float32Array(n);
  const kv = new KvPool({ numPages: pages, pageSize: 4, kvDim: 1, numLayers: 1, numMtpLayers: 0, alloc });
  const state = new StatePool({ slots, numLinear: 1, convSize: 1, ssmSize: 1, batchCapacity: 0, maxSteps: 0, alloc });
  const cache = new RadixCache(kv, state);
  /** A "request" that computed `tokens`: pages with their KV rows = token values. */
  const request = (tokens: number[]) => {
    const pg = kv.alloc(kv.pagesFor(tokens.length))!;
    tokens.forEach((t, i) => (kv.layers[0]!.k[pg[Math.floor(i / 4)]! * 4 + (i % 4)] = t));
    return pg;
  };
  const snap = (value: number) => {
    const slot = state.alloc()!;
    state.view(slot)[0]!.ssm[0] = value;
    return { slot, hidden: new Float32Array([value]), chunkedTo: 0 };
  };
  const check = (reqPages: number[][], locks: object[] = []) => {
    const o = cache.owners();
    kv.checkIntegrity([...o.pages, ...reqPages.flat()]);
    state.checkIntegrity(o.slots);
    cache.checkIntegrity(locks);
  };
  return { kv, state, cache, request, snap, check };
}

const seq = (n: number, base = 0): number[] => Array.from({ length: n }, (_, i) => base + i);

test('match returns the deepest snapshot ≤ maxLen, aligned or tail, with shared pages', () => {
  const { kv, state, cache, request, snap, check } = setup();
  const a = seq(11);
  const pa = request(a);
  cache.insert(a.slice(0, 8), pa, snap(8)); // aligned at 8
  cache.insert(a.slice(0, 10), pa, snap(10)); // tail [8, 10)
  const query = [...a, 99];
  const m = cache.match(query, 11)!;
  assert.equal(m.length, 10);
  assert.deepEqual(m.pages, pa.slice(0, 2));
  assert.equal(m.tailPage, pa[2], 'the tail shares the request page holding its rows');
  assert.deepEqual([...kv.layers[0]!.k.subarray(m.tailPage * 4, m.tailPage * 4 + 2)], [8, 9]);
  assert.equal(state.view(m.snap.slot)[0]!.ssm[0], 10);
  cache.unlock(m.handle);
  const m8 = cache.match(query, 9)!;
  assert.equal(m8.length, 8);
  cache.unlock(m8.handle);
  assert.equal(cache.match([5, 5, 5, 5, 5], 5), null);
  assert.equal(cache.match(a, 7), null, 'no snapshot at or below 7');
  kv.release(pa);
  check([]);
});

test('inserting a diverging prefix splits the edge; both snapshots stay reachable', () => {
  const { kv, cache, request, snap, check } = setup();
  const a = seq(12);
  const b = [...seq(4), 50, 51, 52, 53, 54, 55, 56, 57];
  const pa = request(a);
  const pb = request(b);
  cache.insert(a, pa, snap(1));
  cache.insert(b, pb, snap(2));
  const ma = cache.match([...a, 0], 12)!;
  const mb = cache.match([...b, 0], 12)!;
  assert.equal(ma.length, 12);
  assert.equal(mb.length, 12);
  assert.equal(ma.pages[0], mb.pages[0], 'the shared first page is shared');
  check([pa, pb], [ma.handle, mb.handle]);
  cache.unlock(ma.handle);
  cache.unlock(mb.handle);
  kv.release(pa);
  kv.release(pb);
  check([]);
});

test('eviction: LRU leaves first, locked paths never, tombstones pruned, pools consistent', () => {
  const { kv, state, cache, request, snap, check } = setup(14, 6);
  const prefixes = [seq(8, 0), seq(8, 100), seq(8, 200)];
  for (const p of prefixes) {
    const pg = request(p);
    cache.insert(p, pg, snap(p[0]!));
    kv.release(pg); // the request finished; the tree keeps the pages
  }
  const locked = cache.match([...prefixes[0]!, 1], 8)!; // in use: never evicted
  const recent = cache.match([...prefixes[2]!, 1], 8)!; // touched: most recent
  cache.unlock(recent.handle);
  assert.ok(cache.evictPages(kv.freePages + 2));
  assert.equal(cache.stats().evictions, 1);
  const again = cache.match([...prefixes[0]!, 1], 8);
  assert.ok(again, 'locked entry survives');
  cache.unlock(again.handle);
  assert.equal(cache.match([...prefixes[1]!, 1], 8), null, 'the least recently used entry went first');
  const still = cache.match([...prefixes[2]!, 1], 8);
  assert.ok(still, 'the recent entry survives');
  cache.unlock(still.handle);
  check([], [locked.handle]);
  assert.ok(!cache.evictSlots(state.slots), 'the locked snapshot cannot go');
  check([], [locked.handle]);
  // unlocked, slot pressure drops every snapshot; leaves take their pages along
  cache.unlock(locked.handle);
  assert.ok(cache.evictSlots(state.slots));
  assert.deepEqual([cache.stats().snapshots, cache.stats().nodes], [0, 0]);
  assert.equal(kv.freePages, kv.usablePages);
  check([]);
});

test('inserting a tail on a full pool takes no page: it shares the request page, and keeps its rows after the request leaves', () => {
  const { kv, cache, request, snap, check } = setup(6, 6); // 5 usable pages
  const old = seq(4, 300);
  const po = request(old);
  cache.insert(old, po, snap(1)); // an evictable entry (1 page, owned by the tree)
  kv.release(po);
  const a = seq(6);
  const pa = request(a); // 2 pages
  const filler = kv.alloc(kv.freePages)!; // the pool is now full
  assert.ok(cache.insert(a, pa, snap(2))); // aligned node [0,4) + tail [4,6)
  const m = cache.match([...a, 9], 6);
  assert.ok(m && m.length === 6, 'the new tail snapshot is reachable');
  const mo = cache.match([...old, 9], 4);
  assert.ok(mo !== null, 'nothing was evicted');
  cache.unlock(mo.handle);
  check([pa, filler], [m.handle]);
  cache.unlock(m.handle);
  const b = [...seq(4), 77, 78];
  const pb = [pa[0]!, filler.pop()!]; // the request's second page: a fresh one
  kv.layers[0]!.k.set([77, 78], pb[1]! * 4);
  assert.ok(cache.insert(b, pb, snap(3)), 'a second tail on the same node');
  kv.release(pa); // the request leaves: the tails keep their pages
  kv.release([pb[1]!]);
  const mb = cache.match([...b, 1], 6)!;
  assert.deepEqual([...kv.layers[0]!.k.subarray(mb.tailPage * 4, mb.tailPage * 4 + 2)], [77, 78]);
  cache.unlock(mb.handle);
  check([filler]);
});

test('namespaces: snapshots made after a prompt of length P serve only requests with that prompt length', () => {
  const { kv, state, cache, request, check } = setup();
  const a = seq(12);
  const pa = request(a);
  const snapOf = (value: number, chunkedTo: number) => {
    const slot = state.alloc()!;
    state.view(slot)[0]!.ssm[0] = value;
    return { slot, hidden: new Float32Array([value]), chunkedTo };
  };
  assert.ok(cache.insert(a.slice(0, 4), pa, snapOf(1, 4)), 'chunked (a prompt snapshot)');
  assert.ok(cache.insert(a.slice(0, 8), pa, snapOf(2, 6)), 'made after a prompt of 6');
  assert.ok(cache.insert(a.slice(0, 8), pa, snapOf(3, 8)), 'chunked at the same position: its own tree');
  const found = (promptLength: number, maxLen = 11): number => {
    const m = cache.match(a, maxLen, promptLength);
    if (!m) return 0;
    cache.unlock(m.handle);
    return state.view(m.snap.slot)[0]!.ssm[0]!;
  };
  assert.equal(found(6), 2, 'prompt of 6: the snapshot of its own split');
  assert.equal(found(12), 3, 'a longer prompt: the chunked one');
  assert.equal(found(7), 1, 'prompt of 7: neither at 8 (chunked 8 would be computed past its prompt)');
  assert.equal(found(5), 1, 'prompt of 5: only the chunked one below its end');
  kv.release(pa);
  check([]);
  assert.equal(cache.stats().snapshots, 3);
});

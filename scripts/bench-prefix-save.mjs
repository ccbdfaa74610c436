// Prefix-cache save benchmark: how long a save of a realistically sized
// cache holds the event loop (what an engine step or /health would wait), measured with
// perf_hooks.monitorEventLoopDelay and a 1 ms ticker, on synthetic pools of the
// qwen3.5-0.8b state shape (18 Gated DeltaNet layers: conv 3×6144, SSM 16×128×128 f32;
// 6 attention layers + 1 MTP layer of 2×256 KV). Prints one JSON object.
// Usage: node scripts/bench-prefix-save.mjs [--conversations N] [--tokens T] [--every E]
//        [--sync-store PATH]
//   --sync-store: a compiled prefix-store.js exporting the synchronous
//   saveStore(dir, identity, cache, kv, state, hidden, maxBytes) of an earlier version
//   (the "before" number); without it, the current save (slices + writer thread) runs.
//   --control MS: no save; the main thread busy in 4 ms slices for MS ms (the machine's
//   own event-loop delay for a busy thread, to read the other numbers against).
// Run `npm run build` first (it imports dist/).
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { KvPool } from '../dist/src/cache/kv-pool.js';
import { StatePool } from '../dist/src/cache/state-pool.js';
import { RadixCache } from '../dist/src/cache/radix-cache.js';
import { STORE_FILE } from '../dist/src/cache/prefix-store.js';
import { PrefixPersistence } from '../dist/src/engine/prefix-persist.js';

const { values: v } = parseArgs({
  options: {
    conversations: { type: 'string', default: '6' },
    tokens: { type: 'string', default: '768' },
    every: { type: 'string', default: '256' },
    'sync-store': { type: 'string' },
    control: { type: 'string' },
  },
});
const conversations = Number(v.conversations);
const tokens = Number(v.tokens);
const every = Number(v.every);
const G = { pageSize: 16, kvDim: 512, layers: 6, mtpLayers: 1, numLinear: 18, convSize: 3 * 6144, ssmSize: 16 * 128 * 128, hidden: 1024 };

const snapshotsWanted = conversations * Math.floor(tokens / every);
const alloc = (n) => new Float32Array(n);
const kv = new KvPool({ numPages: conversations * Math.ceil(tokens / G.pageSize) + 2, pageSize: G.pageSize, kvDim: G.kvDim,
  numLayers: G.layers, numMtpLayers: G.mtpLayers, alloc });
const state = new StatePool({ slots: snapshotsWanted, numLinear: G.numLinear, convSize: G.convSize, ssmSize: G.ssmSize, batchCapacity: 0, maxSteps: 0, alloc });
const cache = new RadixCache(kv, state);
const ctx = { cache, kv, state, kvDim: G.kvDim, interval: every, mtp: true, inserted: 0 };

// distinct conversations, each snapshotted every `every` tokens (pattern data: the save's cost does not depend on values)
for (let c = 0; c < conversations; c++) {
  const ids = Array.from({ length: tokens }, (_, i) => (c * 7919 + i * 31) % 50000);
  const pages = kv.alloc(Math.ceil(tokens / G.pageSize));
  for (const l of [...kv.layers, ...kv.mtpLayers]) for (const p of pages) l.k.fill(c + p * 1e-3, p * G.pageSize * G.kvDim, (p + 1) * G.pageSize * G.kvDim);
  for (let at = every; at <= tokens; at += every) {
    const slot = state.alloc();
    for (const view of state.view(slot)) { view.conv.fill(at); view.ssm.fill(c + at * 1e-4); }
    if (cache.insert(ids.slice(0, at), pages.slice(0, at / G.pageSize), { slot, hidden: new Float32Array(G.hidden).fill(at), chunkedTo: at })) ctx.inserted++;
  }
  kv.release(pages);
}

const dir = mkdtempSync(join(tmpdir(), 'ds-bench-save-'));
// constructed before the measurement: it checks the directory (a probe file, fsynced) at start
const persistence = v['sync-store'] ? null : new PrefixPersistence(ctx, 'bench', G.hidden, { dir, maxBytes: 2 ** 31, saveMs: 0 }, (m) => console.error(m));
const histogram = monitorEventLoopDelay({ resolution: 1 });
let last = performance.now();
let maxGap = 0;
const ticker = setInterval(() => {
  const now = performance.now();
  maxGap = Math.max(maxGap, now - last);
  last = now;
}, 1);
// the same measurement with nothing running: the machine's own scheduling noise
histogram.enable();
await new Promise((r) => setTimeout(r, 1000));
histogram.disable();
const idle = { maxMs: +(histogram.max / 1e6).toFixed(1), p99Ms: +(histogram.percentile(99) / 1e6).toFixed(1), maxTickGapMs: +maxGap.toFixed(1) };
histogram.reset();
histogram.enable();
maxGap = 0;
last = performance.now();
const t0 = performance.now();
let mode;
if (v.control) {
  // no save: the main thread busy in 4 ms slices for as long as a save takes, yielding
  // between them — the delay this machine gives any busy event loop
  mode = 'control: 4 ms busy slices, no save';
  while (performance.now() - t0 < Number(v.control)) {
    const s = performance.now();
    while (performance.now() - s < 4);
    await new Promise((r) => setImmediate(r));
  }
} else if (v['sync-store']) {
  mode = 'synchronous (before)';
  const { saveStore } = await import(resolve(v['sync-store']));
  await new Promise((r) => setImmediate(r));
  saveStore(dir, 'bench', cache, kv, state, G.hidden, 2 ** 31);
} else {
  mode = 'slices + writer thread (after)';
  await persistence.save();
  await persistence.close();
}
const saveMs = performance.now() - t0;
await new Promise((r) => setTimeout(r, 20));
histogram.disable();
clearInterval(ticker);
const bytes = v.control ? 0 : statSync(join(dir, STORE_FILE)).size;
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({
  bench: 'prefix-cache save', mode, snapshots: cache.stats().snapshots, fileMB: +(bytes / 2 ** 20).toFixed(1), saveMs: Math.round(saveMs),
  eventLoopDelayMaxMs: +(histogram.max / 1e6).toFixed(1), eventLoopDelayP99Ms: +(histogram.percentile(99) / 1e6).toFixed(1),
  maxTickGapMs: +maxGap.toFixed(1), idle, loadAverage: +loadavg()[0].toFixed(1), cpus: cpus().length,
}));

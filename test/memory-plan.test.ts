// Memory planning: a budget sizes KV, state slots and verify scratch; pools
// are chunked so they span several WebAssembly memories; explicit flags that do not fit
// are errors naming the flag; requests longer than the planned context get a 4xx.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type MemoryNeeds, MAX_ALLOC_BYTES, formatPlan, parseMemoryBudget, planMemory } from '../src/engine/memory-plan.js';
import { StatePool } from '../src/cache/state-pool.js';
import { createWasmKernels, WasmKernels } from '../src/kernels/wasm/index.js';
import { withEngine } from './engine-helpers.js';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, TINY_THINK } from './paths.js';

const GB = 1e9;
// a Qwen3-Next-80B-like model: 36 linear layers of 32×128×128 f32 states, 12+1 KV layers
const slot = 36 * (32 * 128 * 128 + 3 * 8192) * 4;
const NEEDS: MemoryNeeds = {
  weightBytes: 10 * GB, kvBytesPerToken: 13 * 2 * 512 * 4, kvLayerBytesPerToken: 2 * 512 * 4,
  slotBytes: slot, scratchRowBytes: 4 * slot, modelMaxContext: 262144,
};
const base = { prefixCache: true, pageSize: 16 } as const;

function poolBytes(p: ReturnType<typeof planMemory>): number {
  return p.kvBytes + p.runningStateBytes + p.cacheStateBytes + p.scratchBytes;
}

test('budget parsing: bytes with units and percentages; junk is a clear error', () => {
  assert.deepEqual(parseMemoryBudget('8G'), { bytes: 8e9 });
  assert.deepEqual(parseMemoryBudget('6GiB'), { bytes: 6 * 1024 ** 3 });
  assert.deepEqual(parseMemoryBudget('123456'), { bytes: 123456 });
  assert.deepEqual(parseMemoryBudget('60%'), { fraction: 0.6 });
  assert.throws(() => parseMemoryBudget('lots'), /--memory-budget must be bytes/);
  assert.throws(() => parseMemoryBudget('150%'), /percentage must be in/);
});

test('the default plan fits in 80% of the available memory and never exceeds it', () => {
  for (const avail of [4 * GB, 8 * GB, 16 * GB, 64 * GB]) {
    const p = planMemory(NEEDS, base, avail);
    assert.ok(poolBytes(p) <= 0.8 * avail, `${poolBytes(p)} > 80% of ${avail}`);
    assert.ok(p.maxRunning >= 1 && p.maxContext <= NEEDS.modelMaxContext && p.maxContext <= p.kvTokens);
    assert.equal(p.kvTokens % 16, 0);
    assert.ok(p.kvTokens * NEEDS.kvLayerBytesPerToken <= MAX_ALLOC_BYTES, 'one KV layer fits one memory');
    assert.match(formatPlan(p), /^memory plan: weights 10\.00 GB; budget .* KV \d+ tokens .* state \d+ running .* cached .* verify scratch \d+ rows/);
  }
  // a small machine: fewer running requests, shorter context, still a valid plan
  const small = planMemory(NEEDS, base, 2 * GB);
  assert.ok(small.maxRunning < 16 && small.maxContext < 262144, JSON.stringify(small));
  // plenty: defaults as before (16 running, 64 cached, the model's context)
  const big = planMemory(NEEDS, base, 200 * GB);
  assert.equal(big.maxRunning, 16);
  assert.equal(big.cacheSlots, 64);
  assert.equal(big.maxContext, 262144);
});

test('explicit sizes that do not fit the budget are errors naming the flag', () => {
  const budget = { bytes: 3 * GB };
  assert.throws(() => planMemory(NEEDS, { ...base, budget, maxRunning: 16 }, 0), /cannot hold 16 running request\(s\).*lower --max-running/);
  assert.throws(() => planMemory(NEEDS, { ...base, budget, maxRunning: 2, kvCacheTokens: 1e6 }, 0), /--kv-cache-tokens 1000000/);
  assert.throws(() => planMemory(NEEDS, { ...base, budget, maxRunning: 2, cacheSlots: 500 }, 0), /--cache-state-slots 500/);
  assert.throws(() => planMemory(NEEDS, { ...base, budget: { bytes: 1e6 } }, 0), /memory budget 1\.0 MB/);
  const p = planMemory(NEEDS, { ...base, budget, maxRunning: 2, cacheSlots: 2, kvCacheTokens: 1000 }, 0);
  assert.equal(p.kvTokens, 1008);
  assert.equal(p.maxContext, 1008);
  assert.ok(poolBytes(p) <= 3 * GB);
  const pct = planMemory(NEEDS, { ...base, budget: { fraction: 0.5 } }, 8 * GB);
  assert.ok(poolBytes(pct) <= 4 * GB);
  assert.match(pct.budgetFrom, /50% of 8\.00 GB available/);
});

test('state pool slots and scratch rows are chunks within maxChunkFloats: the pool spans memories', async () => {
  const kernels = await createWasmKernels({ threads: 1, memoryBytes: 8 << 20 });
  try {
    assert.ok(kernels instanceof WasmKernels);
    // 12 slots of 2 layers × 64K floats (512 KiB) + 4 scratch rows × 3 steps ≈ 12 MiB > one 8 MiB memory
    // chunks of at most 2 MiB: 4 slots, or 1 scratch row (alone past the limit)
    const pool = new StatePool({ slots: 11, numLinear: 2, convSize: 1024, ssmSize: 64 * 1024 - 1024, batchCapacity: 4, maxSteps: 3,
      alloc: (n) => kernels.alloc(n), maxChunkFloats: 1 << 19 });
    assert.ok(kernels.mem.arenas.length >= 2, `only ${kernels.mem.arenas.length} memories`);
    const s = pool.alloc()!;
    for (const v of pool.view(s)) assert.equal(kernels.mem.locate(v.conv), kernels.mem.locate(v.ssm));
    pool.view(s)[1]!.ssm.fill(3);
    const t = pool.alloc()!;
    pool.copy(t, s);
    assert.equal(pool.view(t)[1]!.ssm[5], 3);
    assert.equal(pool.view(t)[0]!.ssm[5], 0);
    const sc = pool.scratch(3, 3);
    sc[1]!.ssm.fill(7);
    sc[1]!.conv.fill(5);
    pool.copyFromScratch(t, 3, 2);
    assert.equal(pool.view(t)[1]!.ssm[0], 7);
    assert.equal(pool.view(t)[1]!.conv[0], 5);
    pool.poison(2);
    assert.ok(Number.isNaN(pool.scratch(2, 1)[0]!.ssm[0]!));
    assert.equal(pool.scratch(1, 1)[0]!.ssm[0], 0, 'rows below fromRow untouched');
  } finally {
    kernels.dispose();
  }
});

test('engine: a budget sets the pools; prompts beyond the planned context are rejected, not crashed', async () => {
  await withEngine({ model: TINY_THINK(), memoryBudget: '40M', maxRunning: 2, cacheStateSlots: 2 }, async (e) => {
    const plan = e.memoryPlan!;
    assert.ok(plan.kvBytes + plan.runningStateBytes + plan.cacheStateBytes + plan.scratchBytes <= 40e6);
    assert.equal(e.maxContext, plan.maxContext);
    assert.equal(e.kv.usablePages * e.kv.pageSize, plan.kvTokens);
    await assert.rejects(async () => e.complete({ promptIds: new Array(e.maxContext).fill(5), maxTokens: 1 }),
      (err: Error & { code?: string }) => /context length/.test(err.message));
    const done = await e.complete({ promptIds: [5, 6, 7], maxTokens: 3 });
    assert.equal(done.outputIds.length, 3);
  });
});

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('generate prints the memory plan on one line; a bad or too small budget is a clear error', () => {
  const ok = cli(['generate', '--prompt-ids', '5,6,7', '--max-tokens', '2', '--json', '--memory-budget', '64MiB', '--max-context', '1024']);
  assert.equal(ok.status, 0, ok.stderr);
  const lines = ok.stderr.split('\n').filter((l) => l.includes('memory plan'));
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /^deltaserve: memory plan: weights [\d.]+ [kMG]B; budget 67\.1 MB \(--memory-budget\), .*KV \d+ tokens .*\(context 1024\), state \d+ running .* \+ \d+ cached .*, verify scratch \d+ rows/);
  const junk = cli(['generate', '--prompt-ids', '5', '--memory-budget', 'plenty']);
  assert.notEqual(junk.status, 0);
  assert.match(junk.stderr, /--memory-budget must be bytes/);
  assert.doesNotMatch(junk.stderr, /^\s+at /m, 'no stack trace');
  const tiny = cli(['generate', '--prompt-ids', '5', '--memory-budget', '1000', '--max-running', '4']);
  assert.notEqual(tiny.status, 0);
  assert.match(tiny.stderr, /cannot hold 4 running request\(s\).*--max-running/);
});

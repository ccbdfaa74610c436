// The engine on the webgpu backend (Dawn on whatever adapter the machine has; lavapipe on
// CI): the KV and state pools live in GPU buffers and every pool copy is a GPU op
// (cache/pool-storage.ts). The CPU exactness invariants, on webgpu, on tiny-think with short
// prompts (lavapipe is slow): MTP on == off bit for bit; a prefix-cache hit == a cold run bit
// for bit; a request alone == in a batch of 16 (with padding poisoned); the prefix cache
// saved to disk and loaded back. tiny-next-moe's golden ids (MoE routing). tiny-think's
// golden greedy ids on webgpu are webgpu-device-picks' first test (its three shortest golden
// prompts, recall-zeroshot-think included, MTP off and on) and webgpu-dump-logits' (the
// first ids of every golden prompt).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { gpuAdapterOf } from '../src/kernels/index.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { type RunResult, runAll, sameBits, withEngine } from './engine-helpers.js';
import { sharedPath, TINY_NEXT_MOE, TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

const base = { model: '', kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024 };

/** Raw prompts of 9, 8, 5 and 17 tokens (no chat template: its ~13 tokens a prompt were most
 * of the batch test's prefill, ~0.12 CPU-s a token on lavapipe; no check here reads the text). */
const PROMPTS: GenerateRequest[] = [
  { prompt: 'What is 12 + 7?', maxTokens: 8, ignoreEos: true },
  { prompt: 'Name a color.', maxTokens: 6, ignoreEos: true },
  { prompt: 'The capital of France is', maxTokens: 7, ignoreEos: true },
  { prompt: 'Spell cat backwards, please.', maxTokens: 5, ignoreEos: true },
];

function assertSameRun(got: RunResult, want: RunResult, what: string): void {
  assert.deepEqual(got.ids, want.ids, `${what}: ids`);
  assert.equal(got.logits.length, want.logits.length, `${what}: logits rows`);
  got.logits.forEach((l, i) => assert.ok(sameBits(l, want.logits[i]!), `${what}: logits of token ${i} differ`));
}

/** Each prompt alone (one at a time), MTP off, no prefix cache: the reference runs. */
let alone: RunResult[] = [];

before(async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
  alone = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0, prefixCache: false, maxRunning: 4 }, async (e) => {
    assert.ok(gpuAdapterOf(e.model.kernels), 'the engine runs on a GPU adapter');
    const out: RunResult[] = [];
    for (const p of PROMPTS) out.push(...await runAll(e, [p]));
    // every run here and below reads back through the pacer on a CPU adapter (readback-pacer.ts)
    const g = (e.model.kernels as unknown as WebGpuBoundaryKernels).g;
    if (g.adapter.cpuEmulation) assert.ok((g.dispatchMemory.pacer?.sleeps ?? 0) > 0, 'a CPU adapter: read-backs paced (slept before mapping)');
    else assert.equal(g.dispatchMemory.pacer, null, 'a GPU: no pacing');
    return out;
  });
});

describe('engine on webgpu', () => {
  test('tiny-next-moe reproduces a golden greedy continuation (add-zeroshot-think)', async () => {
    const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-next-moe.json'), 'utf8')) as
      { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };
    const p = golden.prompts.find((x) => x.name === 'add-zeroshot-think')!;
    await withEngine({ ...base, model: TINY_NEXT_MOE(), specTokens: 0, prefixCache: false, maxRunning: 1 }, async (e) => {
      // routed experts and an untied embedding table on the GPU
      const done = await e.complete({ promptIds: p.prompt_ids, maxTokens: p.greedy_ids.length, ignoreEos: true });
      assert.deepEqual([...done.outputIds], p.greedy_ids);
    });
  });

  test('MTP on (k = 3, state commits and rollbacks on the GPU) == MTP off, bit for bit', async () => {
    const spec = await withEngine({ ...base, model: TINY_THINK(), specTokens: 3, prefixCache: false, maxRunning: 1 }, async (e) => {
      const out: RunResult[] = [];
      for (const p of PROMPTS.slice(0, 2)) out.push(...await runAll(e, [p]));
      return { out, spec: e.stats().spec };
    });
    assert.ok(spec.spec.rounds > 0 && spec.spec.drafted > 0, 'drafts were verified');
    spec.out.forEach((r, i) => assertSameRun(r, alone[i]!, `prompt ${i}`));
  });

  test('a request alone == the same request in a batch of 16 (each prompt in 4 rows; padding and stale scratch poisoned)', async () => {
    // 3 tokens fewer than alone (5, 3, 4, 2: rows still finish at different steps), compared
    // with alone's first ones: most of the test's CPU is its verify rows (16 × 3 a step)
    const short = (p: GenerateRequest): GenerateRequest => ({ ...p, maxTokens: p.maxTokens! - 3 });
    const sixteen = Array.from({ length: 16 }, (_, i) => short(PROMPTS[i % PROMPTS.length]!));
    const batched = await withEngine({ ...base, model: TINY_THINK(), specTokens: 2, prefixCache: false, maxRunning: 16, poisonPadding: true },
      (e) => runAll(e, sixteen));
    batched.forEach((r, i) => {
      const want = alone[i % PROMPTS.length]!;
      const n = sixteen[i]!.maxTokens!;
      assertSameRun(r, { ...want, ids: want.ids.slice(0, n), logits: want.logits.slice(0, n) }, `request ${i} (prompt ${i % PROMPTS.length}) in the batch`);
    });
  });

  test('a prefix-cache hit (snapshot copied on the GPU) == a cold run, bit for bit', async () => {
    const turn1: GenerateRequest = { messages: [{ role: 'user', content: 'Name two colors.' }], maxTokens: 6, ignoreEos: true };
    const turn2 = (reply: string): GenerateRequest => ({
      messages: [{ role: 'user', content: 'Name two colors.' }, { role: 'assistant', content: reply }, { role: 'user', content: 'And one animal?' }],
      maxTokens: 6, ignoreEos: true,
    });
    const warm = await withEngine({ ...base, model: TINY_THINK(), specTokens: 2, maxRunning: 2 }, async (e: Engine) => {
      const [first] = await runAll(e, [turn1]);
      const reply = first!.text.split('</think>').pop()!.trim();
      const logits: Float32Array[] = [];
      const done = await e.complete({ ...turn2(reply), captureLogits: (l) => logits.push(l.slice()) });
      e.checkIntegrity();
      return { reply, second: { ids: [...done.outputIds], logits, finishReason: done.finishReason, text: done.text }, cached: done.usage.cachedTokens };
    });
    assert.ok(warm.cached > 0, 'the second turn hit the prefix cache');
    const [cold] = await withEngine({ ...base, model: TINY_THINK(), specTokens: 2, prefixCache: false, maxRunning: 2 },
      (e) => runAll(e, [turn2(warm.reply)]));
    assertSameRun(warm.second, cold!, 'turn 2 with a prefix hit vs cold');
  });

  test('--prefix-cache-dir: saved from GPU buffers, loaded into them; the restarted hit == the cold run, bit for bit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ds-webgpu-persist-'));
    const logs: string[] = [];
    try {
      const req: GenerateRequest = { messages: [{ role: 'user', content: 'Remember a=1, b=2, c=3, d=4, e=5, f=6, g=7 and h=8. What is c?' }],
        maxTokens: 5, ignoreEos: true };
      const opts = { ...base, model: TINY_THINK(), specTokens: 0, maxRunning: 1, prefixCacheDir: dir, prefixCacheSaveMs: 0, log: (m: string) => void logs.push(m) };
      const [cold] = await withEngine(opts, (e) => runAll(e, [req])); // close() saves
      const warm = await withEngine(opts, async (e) => {
        const disk = e.stats().prefixCache!.disk!;
        assert.ok(disk.loads === 1 && disk.loadedSnapshots > 0, `${JSON.stringify(disk)} ${logs.join('; ')}`);
        const logits: Float32Array[] = [];
        const done = await e.complete({ ...req, captureLogits: (l) => logits.push(l.slice()) });
        e.checkIntegrity();
        return { run: { ids: [...done.outputIds], logits, finishReason: done.finishReason, text: done.text }, cached: done.usage.cachedTokens };
      });
      assert.ok(warm.cached > 0, 'the restarted engine hit the loaded cache');
      assertSameRun(warm.run, cold!, 'restarted hit vs cold');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

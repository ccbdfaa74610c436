// Model level: the forward pass with the wasm backend's matmulGroup (the layers' qkv/z/b/a,
// q/k/v and gate/up groups as one pool run each) == the same forward with every group run
// as separate matmul calls, logits bit for bit — prefill of two sequences in one batch
// (M = Σ T), then batched decode steps (M = 2) — on bf16, --quantize q4_k and a MoE model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { matmulGroupByCalls } from '../src/kernels/matmul-group.js';
import { loadModel, allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden, lmHead } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { sameBits } from './engine-helpers.js';
import { TINY_NEXT_MOE, TINY_THINK } from './paths.js';

/** k with matmulGroup replaced by one matmul call per entry. */
function ungrouped(k: Kernels): Kernels {
  return new Proxy(k, {
    get(target, prop, receiver) {
      if (prop === 'matmulGroup') return (...a: Parameters<Kernels['matmulGroup']>) => matmulGroupByCalls(target, ...a);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** Logits of every step: a batched prefill of two prompts, then 3 batched greedy decode steps. */
function run(m: Model): Float32Array[] {
  const ws = new StepArena(m);
  const prompts = [[5, 17, 300, 42, 9, 77, 120, 3, 64, 18, 250, 11, 6], [900, 4, 33, 71, 2, 8, 15]];
  const seqs = prompts.map((p) => {
    const mem = allocSequenceMemory(m, 64);
    return { pageTable: mem.pageTable, kv: mem.kv, state: mem.state, len: p.length };
  });
  const argmax = (v: Float32Array, row: number, n: number): number => {
    let b = 0;
    for (let i = 1; i < n; i++) if (v[row * n + i]! > v[row * n + b]!) b = i;
    return b;
  };
  const vocab = m.weights.lmHead.rows;
  const logits: Float32Array[] = [];
  const fw = forwardHidden(m, ws, prompts.map((p, i) => ({ ...seqs[i]!, tokens: p, start: 0, chunked: true })));
  let last = lmHead(m, ws, fw.hidden, [prompts[0]!.length - 1, prompts[0]!.length + prompts[1]!.length - 1]);
  logits.push(last);
  for (let step = 0; step < 3; step++) {
    const next = [argmax(last, 0, vocab), argmax(last, 1, vocab)];
    const out = forwardHidden(m, ws, seqs.map((s, i) => ({ ...s, tokens: [next[i]!], start: s.len + step, chunked: false })));
    last = lmHead(m, ws, out.hidden, [0, 1]);
    logits.push(last);
  }
  return logits;
}

for (const [name, dir, quantize] of [['tiny-think bf16', TINY_THINK, undefined], ['tiny-think --quantize q4_k', TINY_THINK, 'q4_k'],
  ['tiny-next-moe --quantize q8_0', TINY_NEXT_MOE, 'q8_0']] as const) {
  test(`${name}: forward with matmulGroup == with separate matmul calls, logits bit for bit (threads 1, 2)`, async () => {
    for (const threads of [1, 2]) {
      const k = await createWasmKernels({ threads });
      try {
        const model = loadModel(dir(), k, { quantize });
        const grouped = run(model);
        const separate = run({ ...model, kernels: ungrouped(k) }); // the same weights
        assert.equal(grouped.length, separate.length);
        grouped.forEach((l, s) => assert.ok(sameBits(l, separate[s]!), `threads=${threads} step ${s}: logits differ`));
      } finally {
        k.dispose();
      }
    }
  });
}

// Invariant 1 (docs/ARCHITECTURE.md "Invariants"): logits, greedy ids, MTP top-10 and the layer-0 state norm
// match ../shared/golden (float64 reference) on every kernel backend. The shared check;
// golden.test.ts runs it on the ref backend, golden-wasm.test.ts on the wasm backend.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { sharedPath } from './paths.js';
import { loadModel, allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden, lmHead, mtpForward } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import type { Kernels } from '../src/kernels/types.js';
import { relErr } from './numeric.js';

/** Relative tolerance of every golden comparison (logits, state norm, MTP logits). */
export const GOLDEN_TOL = 1e-4;

/** One prompt of ../shared/golden/<model>.json. */
export interface GoldenPrompt {
  name: string;
  prompt_ids: number[];
  last_logits: number[];
  greedy_ids: number[];
  mtp_logits_top: [number, number][];
  gdn_state_layer0_norm: number;
}

function argmax(v: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** `modelPath` (default ../shared/models/<modelName>) may be another file of the same
 * model, e.g. its GGUF. */
export function checkGolden(modelName: string, kernels: () => Kernels, modelPath?: () => string): void {
  const golden = JSON.parse(readFileSync(sharedPath('golden', `${modelName}.json`), 'utf8')) as { prompts: GoldenPrompt[] };
  let model: Model | undefined;
  const path = modelPath ?? (() => sharedPath('models', modelName));
  const getModel = (): Model => (model ??= loadModel(path(), kernels()));
  const label = modelPath ? basename(path()) : modelName;
  for (const p of golden.prompts) {
    test(`${label} [${kernels().name}] golden: ${p.name}`, () => {
      const m = getModel();
      const ws = new StepArena(m);
      const mem = allocSequenceMemory(m, p.prompt_ids.length + p.greedy_ids.length + 8);
      const seq = { pageTable: mem.pageTable, kv: mem.kv, state: mem.state };
      const P = p.prompt_ids.length;
      const fw = forwardHidden(m, ws, [{ ...seq, tokens: p.prompt_ids, start: 0, chunked: true }]);
      const hidden = fw.hidden.slice();
      const logits = lmHead(m, ws, hidden, [P - 1]);
      assert.equal(logits.length, p.last_logits.length);
      const err = relErr(logits, p.last_logits);
      assert.ok(err <= GOLDEN_TOL, `last logits rel err ${err}`);
      // layer-0 Gated DeltaNet state norm after the prompt
      let ss = 0;
      for (const x of mem.state[0]!.ssm) ss += x * x;
      const norm = Math.sqrt(ss);
      assert.ok(Math.abs(norm - p.gdn_state_layer0_norm) / p.gdn_state_layer0_norm <= GOLDEN_TOL, `state norm ${norm} vs ${p.gdn_state_layer0_norm}`);
      // MTP head at positions 0..P−1 fed (h_t, x_{t+1}), the last with greedy_ids[0]
      const mtpTokens = [...p.prompt_ids.slice(1), p.greedy_ids[0]!];
      const mtpOut = mtpForward(m, ws, [{ tokens: mtpTokens, hidden, start: 0, pageTable: mem.pageTable, kv: mem.mtpKv[0]! }]);
      const mtpLogits = lmHead(m, ws, mtpOut, [P - 1]);
      const top = [...mtpLogits.keys()].sort((a, b) => mtpLogits[b]! - mtpLogits[a]!).slice(0, 10);
      assert.deepEqual(top, p.mtp_logits_top.map(([id]) => id), 'MTP top-10 ids');
      const maxAbs = Math.max(...p.mtp_logits_top.map(([, v]) => Math.abs(v)));
      for (const [id, v] of p.mtp_logits_top) {
        assert.ok(Math.abs(mtpLogits[id]! - v) / maxAbs <= GOLDEN_TOL, `MTP logit ${id}: ${mtpLogits[id]} vs ${v}`);
      }
      // greedy decode with the step-by-step recurrence
      const out: number[] = [argmax(logits)];
      while (out.length < p.greedy_ids.length) {
        const pos = P + out.length - 1;
        const step = forwardHidden(m, ws, [{ ...seq, tokens: [out[out.length - 1]!], start: pos, chunked: false }]);
        out.push(argmax(lmHead(m, ws, step.hidden, [0])));
      }
      assert.deepEqual(out, p.greedy_ids);
    });
  }
}

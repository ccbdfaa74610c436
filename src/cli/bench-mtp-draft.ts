// The model-level time of an MTP draft chain for `bench --mode mtp`: k draft steps per
// round for B sequences, each step an MTP forward of one token per sequence, the draft
// head (lm_head) and one read-back, as engine/speculative/draft.ts runs them.
import { GDN_CHUNK, type Tensor } from '../kernels/types.js';
import { StepArena } from '../model/arena.js';
import { forwardHidden, lmHeadInto, mtpForward } from '../model/forward.js';
import { allocSequenceMemory, type AnyModel } from '../model/model.js';
import { DeltaserveError } from '../util/errors.js';

async function read(model: AnyModel, t: Tensor, n: number): Promise<void> {
  const r = model.kernels.readBack([{ t, offset: 0, length: n }]);
  if (r instanceof Promise) await r;
}

/** Median ms of one chain of k draft steps over `batch` sequences of `prompt` tokens. */
export async function timeDraftChain(model: AnyModel, batch: number, prompt: number, k: number, reps: number): Promise<number> {
  if (model.weights.mtp.length === 0) throw new DeltaserveError('bad_config', 'bench --mode mtp needs a checkpoint with an MTP head');
  const ws = new StepArena(model);
  const h = model.config.hiddenSize;
  const v = model.weights.lmHead.rows;
  const mems = Array.from({ length: batch }, () => allocSequenceMemory(model, prompt + k + 2));
  const ids = (i: number): number[] => Array.from({ length: prompt }, (_, j) => (i * 31 + j * 7) % Math.min(v, 990));
  const fw = forwardHidden(model, ws, mems.map((m, i) => ({ tokens: ids(i), start: 0, pageTable: m.pageTable, kv: m.kv, state: m.state, chunked: prompt >= GDN_CHUNK })));
  const first = ws.draftHidden.rows(batch);
  model.kernels.gatherRows(first, fw.hidden, fw.offsets.map((o) => o + prompt - 1), h);
  await read(model, first, 1);
  const times: number[] = [];
  for (let r = 0; r < reps + 1; r++) { // the first chain warms up
    const t0 = performance.now();
    let hidden: Tensor = first;
    for (let step = 0; step < k; step++) {
      const out = mtpForward(model, ws, mems.map((m, i) => ({ tokens: [(i + step) % 7], hidden, hiddenRow: i, start: prompt - 1 + step, pageTable: m.pageTable, kv: m.mtpKv[0]! })));
      const next = ws.draftHidden.rows(batch);
      model.kernels.gatherRows(next, out, mems.map((_, i) => i), h);
      hidden = next;
      const logits = lmHeadInto(model, ws, next, mems.map((_, i) => i), ws.draftLogits.rows(batch));
      await read(model, logits, batch * v);
    }
    if (r > 0) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

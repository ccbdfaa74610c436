// Kernels.mtpInputs against the calls mtpForward made before it (kept here as the reference),
// on any backend: the cat rows, element by element, and the MTP head's draft logits through
// mtpForward + lmHeadInto (contiguous rows: a view of the hidden rows) against the old calls
// + a gathered lm_head. Shared by test/mtp-inputs (ref, wasm) and test/webgpu-mtp-inputs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AnyKernels, KvLayerView, MtpInputs, Tensor } from '../src/kernels/types.js';
import { lmHeadInto, mtpForward, type MtpDeviceIds, type MtpSeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import type { Model } from '../src/model/model.js';
import { sameBits } from './engine-helpers.js';
import { mtpInputsByCalls } from '../src/kernels/mtp-inputs-by-calls.js';

type AnyModel = Model<Tensor, Tensor>;

/** The calls mtpForward issued before Kernels.mtpInputs (the reference bits: the by-calls
 * definition ref and wasm run). */
export function oldMtpInputs(k: AnyKernels, a: MtpInputs<Tensor, Tensor>): void {
  mtpInputsByCalls(k, a);
}

/** A sequence of a case: rows [row, row + n) of the hidden source, after a host first row. */
export interface CaseSeq {
  readonly row: number;
  readonly n: number;
  readonly first: boolean;
}

/** Sequences of the cases: an extend after a prefix hit (first row, then rows), several
 * sequences with and without first rows, a first row alone, draft steps (one row each). */
export const CASES: readonly { readonly name: string; readonly seqs: readonly CaseSeq[] }[] = [
  { name: 'one sequence, first row + 3 rows', seqs: [{ row: 2, n: 3, first: true }] },
  { name: 'three sequences, mixed first rows', seqs: [{ row: 4, n: 2, first: true }, { row: 0, n: 3, first: false }, { row: 7, n: 0, first: true }] },
  { name: 'draft step, 4 chains', seqs: [0, 1, 2, 3].map((j) => ({ row: j, n: 1, first: false })) },
  { name: 'one row', seqs: [{ row: 5, n: 1, first: false }] },
];

/** Deterministic values of mixed magnitudes (xorshift). */
export function values(n: number, seed: number, scale = 1): Float32Array {
  let s = (seed * 2654435761) >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    const u = s / 2 ** 32 - 0.5;
    out[i] = u * scale * (i % 7 === 0 ? 9 : 1);
  }
  return out;
}

function idsOfCase(m: number, vocab: number, seed: number): number[] {
  // repeats and both ends of the table
  return Array.from({ length: m }, (_, i) => (i === 0 ? vocab - 1 : i === 1 ? 0 : (seed * 131 + i * 977) % vocab));
}

/** ids[offset + i] in a kernel int32 tensor, put there by argmaxRows (as a draft's picks are). */
export function deviceIds(k: AnyKernels, ids: readonly number[], vocab: number, offset: number): Tensor {
  const t = k.allocI32(offset + ids.length + 2);
  const logits = k.alloc(ids.length * vocab);
  const rows = new Float32Array(ids.length * vocab);
  ids.forEach((id, i) => { rows[i * vocab + id] = 1; });
  k.write(logits, 0, rows);
  k.argmaxRows(t, offset, logits, ids.length, vocab, vocab);
  return t;
}

async function read(k: AnyKernels, t: Tensor, n: number): Promise<Float32Array> {
  const [r] = await k.readBack([{ t, offset: 0, length: n }]);
  return Float32Array.from(r!);
}

/** cat of k.mtpInputs and of the old calls for one case, host or device ids: bit-equal.
 * Returns the dispatches the op recorded (`dispatches`: the backend's counter, if any). */
export async function checkCat(model: AnyModel, c: (typeof CASES)[number], device: boolean, seed: number,
  dispatches?: () => number): Promise<number> {
  const k = model.kernels;
  const h = model.config.hiddenSize;
  const mtp = model.weights.mtp[0]!;
  const table = model.weights.embed;
  const m = c.seqs.reduce((n, s) => n + s.n + (s.first ? 1 : 0), 0);
  const srcRows = 10;
  const src = k.alloc(srcRows * h);
  k.write(src, 0, values(srcRows * h, seed, 4));
  const ids = idsOfCase(m, table.rows, seed);
  const idsT = device ? deviceIds(k, ids, table.rows, 3) : null;
  const runs = c.seqs.map((s, i) => ({ src, row: s.row, n: s.n, first: s.first ? values(h, seed * 10 + i, 2) : null }));
  const operands = (cat: Tensor): MtpInputs<Tensor, Tensor> => ({
    cat, e: k.alloc(m * h), hid: k.alloc(m * h), table, ids: idsT ? { device: idsT, offset: 3 } : { host: ids },
    normEmbedding: mtp.normEmbedding, normHidden: mtp.normHidden, eps: model.config.rmsNormEps, zeroCentered: true, runs,
  });
  const catNew = k.alloc(m * 2 * h);
  const catOld = k.alloc(m * 2 * h);
  k.fill(catNew, 0, m * 2 * h, 12345);
  k.fill(catOld, 0, m * 2 * h, -54321);
  const before = dispatches?.() ?? 0;
  k.mtpInputs(operands(catNew));
  const recorded = (dispatches?.() ?? 0) - before;
  oldMtpInputs(k, operands(catOld));
  const got = await read(k, catNew, m * 2 * h);
  const want = await read(k, catOld, m * 2 * h);
  assert.ok(want.every((v) => Number.isFinite(v) && v !== -54321), 'the reference wrote every element');
  assert.ok(sameBits(got, want), `cat differs from the old calls (${c.name}, ${device ? 'device' : 'host'} ids): first at ${firstDiff(got, want)}`);
  return recorded;
}

function firstDiff(a: Float32Array, b: Float32Array): string {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return `[${i}] ${a[i]} vs ${b[i]}`;
  return 'none';
}

/** The kernels with mtpInputs replaced by the old calls. */
function withOldInputs(k: AnyKernels): AnyKernels {
  return new Proxy(k, {
    get(target, prop) {
      if (prop === 'mtpInputs') return (a: MtpInputs<Tensor, Tensor>) => oldMtpInputs(target, a);
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** One MTP forward and its draft logits (all rows) over fresh KV: `old` runs the old calls and
 * a gathered lm_head. */
async function draftLogits(model: AnyModel, c: (typeof CASES)[number], device: boolean, seed: number, old: boolean): Promise<Float32Array> {
  const k = model.kernels;
  const h = model.config.hiddenSize;
  const vocab = model.weights.lmHead.rows;
  const m = c.seqs.reduce((n, s) => n + s.n + (s.first ? 1 : 0), 0);
  const pageSize = 16;
  const pages = c.seqs.length * 2;
  const kv: KvLayerView<Tensor> = { k: k.alloc(pages * pageSize * model.layout.kvDim), v: k.alloc(pages * pageSize * model.layout.kvDim), pageSize };
  const src = k.alloc(10 * h);
  k.write(src, 0, values(10 * h, seed, 4));
  const ids = idsOfCase(m, model.weights.embed.rows, seed);
  const idsT = device ? deviceIds(k, ids, model.weights.embed.rows, 3) : null;
  let row = 0;
  const seqs: MtpSeqInput<Tensor>[] = c.seqs.map((s, i) => {
    const t = s.n + (s.first ? 1 : 0);
    const seq = { tokens: ids.slice(row, row + t), hidden: src, hiddenRow: s.row, hiddenFirst: s.first ? values(h, seed * 10 + i, 2) : null,
      start: 3 + i, pageTable: [2 * i, 2 * i + 1], kv };
    row += t;
    return seq;
  });
  const used: AnyModel = old ? { ...model, kernels: withOldInputs(k) } : model;
  const ws = new StepArena(used);
  const dev: MtpDeviceIds<Tensor> | null = idsT ? { ids: idsT, offset: 3 } : null;
  const out = mtpForward(used, ws, seqs, 0, dev);
  const logits = k.alloc(m * vocab);
  const rows = Array.from({ length: m }, (_, j) => j);
  if (old) {
    const picked = k.alloc(m * h);
    k.gatherRows(picked, out, rows, h);
    k.matmul(logits, picked, model.weights.lmHead, m);
  } else {
    lmHeadInto(used, ws, out, rows, logits);
  }
  return read(k, logits, m * vocab);
}

/** The MTP head's draft logits of the new op and view == the old calls and gather. */
export async function checkDraftLogits(model: AnyModel, c: (typeof CASES)[number], device: boolean, seed: number): Promise<void> {
  const got = await draftLogits(model, c, device, seed, false);
  const want = await draftLogits(model, c, device, seed, true);
  assert.ok(want.some((v) => v !== 0) && want.every(Number.isFinite), 'reference logits are finite and not all zero');
  assert.ok(sameBits(got, want), `draft logits differ (${c.name}, ${device ? 'device' : 'host'} ids): first at ${firstDiff(got, want)}`);
}

/** lmHeadInto of contiguous rows r..r+n−1 (a view) == the same rows gathered in reverse
 * order (a gather), row by row. */
export async function checkHeadView(model: AnyModel, seed: number): Promise<void> {
  const k = model.kernels;
  const h = model.config.hiddenSize;
  const vocab = model.weights.lmHead.rows;
  const hidden = k.alloc(8 * h);
  k.write(hidden, 0, values(8 * h, seed, 3));
  const ws = new StepArena(model);
  const rows = [2, 3, 4, 5];
  const view = await read(k, lmHeadInto(model, ws, hidden, rows, k.alloc(rows.length * vocab)), rows.length * vocab);
  const reversed = [...rows].reverse();
  const gathered = await read(k, lmHeadInto(model, ws, hidden, reversed, k.alloc(rows.length * vocab)), rows.length * vocab);
  for (let i = 0; i < rows.length; i++) {
    const a = view.subarray(i * vocab, (i + 1) * vocab);
    const b = gathered.subarray((rows.length - 1 - i) * vocab, (rows.length - i) * vocab);
    assert.ok(sameBits(a, b), `lm_head row ${rows[i]}: the view's logits differ from the gathered row's`);
  }
}

/** Draft steps chained as the drafter chains them (speculative/draft.ts draftForward): step
 * s + 1 reads step s's MTP output rows where they are — the arena's `mtp.out`, which step
 * s + 1's own final norm rewrites — against the same rows first copied to a tensor of their
 * own (the gather the drafter made before). Every step's output rows and draft logits, bit
 * for bit, over 2 chains and 3 steps. */
export async function checkChainedSteps(model: AnyModel, seed: number): Promise<void> {
  const k = model.kernels;
  const h = model.config.hiddenSize;
  const vocab = model.weights.lmHead.rows;
  const [chains, steps] = [2, 3];
  const run = async (copied: boolean): Promise<Float32Array> => {
    const pageSize = 16;
    const kv: KvLayerView<Tensor> = { k: k.alloc(2 * chains * pageSize * model.layout.kvDim), v: k.alloc(2 * chains * pageSize * model.layout.kvDim), pageSize };
    const ws = new StepArena(model);
    const saved = k.alloc(steps * chains * (h + vocab));
    let hidden = k.alloc(chains * h);
    k.write(hidden, 0, values(chains * h, seed, 4));
    for (let s = 0; s < steps; s++) {
      const out = mtpForward(model, ws, Array.from({ length: chains }, (_, j): MtpSeqInput<Tensor> => ({
        tokens: [(seed * 31 + s * 7 + j * 13) % model.weights.embed.rows], hidden, hiddenRow: j, start: 3 + s, pageTable: [2 * j, 2 * j + 1], kv,
      })));
      const logits = lmHeadInto(model, ws, out, Array.from({ length: chains }, (_, j) => j), ws.logits.rows(chains));
      k.copyRows(saved, s * chains * h, h, out, 0, h, chains, h);
      k.copyRows(saved, steps * chains * h + s * chains * vocab, vocab, logits, 0, vocab, chains, vocab);
      if (copied) {
        const own = k.alloc(chains * h);
        k.copyRows(own, 0, h, out, 0, h, chains, h);
        hidden = own;
      } else {
        hidden = out;
      }
    }
    return read(k, saved, steps * chains * (h + vocab));
  };
  const got = await run(false);
  const want = await run(true);
  assert.ok(want.some((v) => v !== 0) && want.every(Number.isFinite), 'reference rows are finite and not all zero');
  assert.ok(sameBits(got, want), `chained draft steps reading the MTP output in place differ from a copy: first at ${firstDiff(got, want)}`);
}

/** The checks every backend runs the same way, registered as tests of the current suite:
 * draft logits, the lm_head view and chained draft steps over `model()` (a getter: a suite
 * may load its model in a `before`). */
export function registerDraftChecks(model: () => AnyModel): void {
  test('draft logits (mtpForward + lm_head view) == the old calls + gathered lm_head', async () => {
    for (const [i, c] of CASES.entries()) for (const device of [false, true]) await checkDraftLogits(model(), c, device, 21 + i);
  });
  test('lm_head over contiguous rows (a view) == the rows gathered', async () => {
    await checkHeadView(model(), 5);
  });
  test('chained draft steps: the next step reads the MTP output in place == a copy', async () => {
    await checkChainedSteps(model(), 9);
  });
}

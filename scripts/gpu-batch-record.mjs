// Recording half of scripts/gpu-batch-model.mjs: the dispatches model/forward issues for a
// step of M rows, captured at the kernels' `run` without encoding them (nothing executes:
// only the recorded keys, WGSL, parameter words and grids matter to the model).
// Scenarios: decode of S sequences (S rows), verify of one sequence of T rows (the
// engine's verify path: per-step GDN states to scratch), the MTP head over R rows of one
// sequence (mtpForward) and the lm_head over R rows.
import { loadModel } from '../dist/src/model/model.js';
import { StepArena } from '../dist/src/model/arena.js';
import { forwardHidden, lmHeadInto, mtpForward } from '../dist/src/model/forward.js';
import { ACTS_COLUMNS } from '../dist/src/kernels/webgpu/wgsl/qmatmul-acts.js';

/** Kernels on this machine's adapter (lavapipe works: nothing runs) with a GPU adapter's
 * launch profile (kernels/webgpu/launches.ts), but `foldQuantActs` (M ≤ 4 quantized matmuls
 * quantizing their own input, `actsColumns` output columns a workgroup) and `convFold` (the GDN
 * causal conv folded into in_proj at decode) as given. Dispose of it when done. */
export async function gpuLikeKernels({ foldQuantActs = true, actsColumns = ACTS_COLUMNS, convFold = true } = {}) {
  const { nodeGpu } = await import('../dist/src/kernels/webgpu-node.js');
  const { WebGpuBoundaryKernels } = await import('../dist/src/kernels/webgpu/kernels.js');
  // nodeGpu keeps the GPU object referenced (a collected one takes Dawn down with it)
  const k = await WebGpuBoundaryKernels.create(await nodeGpu(), { allowCpuEmulation: true, launches: 'gpu' });
  k.g.useLaunches('gpu', { foldQuantActs, actsColumns, convFold });
  return k;
}

/** Every scenario the batch model prices, recorded over `k` from the checkpoint at `path`:
 * decode of each of `streams`, verify of k + 1 rows for each of `ks`, the MTP head over
 * 1..max(ks) + 1 rows, one lm_head row. */
export function recordScenarios(k, path, { streams = [1, 8, 32], ks = [1, 2, 3, 4] } = {}) {
  const r = recorder(k, path);
  const scen = { decode: {}, verify: {}, mtp: {}, head: r.head(1) };
  for (const s of streams) scen.decode[s] = r.decode(s);
  for (const kk of ks) scen.verify[kk + 1] = r.verify(kk + 1);
  for (let rows = 1; rows <= Math.max(...ks) + 1; rows++) scen.mtp[rows] = r.mtp(rows);
  return { kinds: r.kinds, config: r.model.config, scen };
}

/** A recorder over kernels `k` and the model at `path`. */
export function recorder(k, path) {
  const model = loadModel(path, k);
  const { layout } = model;
  const ws = new StepArena(model);
  const PAGE = 16;
  const pool = new Map();
  /** Per full layer one KV tensor of `pages` 16-position pages (the engine's shared pool). */
  const kvPool = (pages) => {
    if (!pool.has(pages)) {
      const rows = pages * PAGE * layout.kvDim;
      pool.set(pages, layout.fullLayers.map(() => { const t = k.alloc(2 * rows); return { k: k.view(t, 0, rows), v: k.view(t, rows, rows), pageSize: PAGE }; }));
    }
    return pool.get(pages);
  };
  /** Per linear layer one conv and one state buffer of n slots, sequence i's the i-th (the
   * engine's StatePool keeps a batch's slots in one chunk: one GDN / conv dispatch a layer). */
  const statesOf = (n) => {
    const pools = layout.linearLayers.map(() => ({ conv: k.alloc(n * layout.convSize), ssm: k.alloc(n * layout.ssmSize) }));
    return Array.from({ length: n }, (_, i) => pools.map((p) => ({ conv: k.view(p.conv, i * layout.convSize, layout.convSize), ssm: k.view(p.ssm, i * layout.ssmSize, layout.ssmSize) })));
  };
  const scratchOf = (t) => layout.linearLayers.map(() => ({ conv: k.alloc(t * layout.convSize), ssm: k.alloc(t * layout.ssmSize) }));
  let layer = null;
  const layers = new Proxy(model.weights.layers, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && /^\d+$/.test(prop)) layer = Number(prop);
      return Reflect.get(target, prop, recv);
    },
  });
  const weights = { ...model.weights, layers };
  Object.defineProperty(weights, 'finalNorm', { get() { layer = 'head'; return model.weights.finalNorm; } });
  const tapped = { ...model, weights };
  /** The dispatches `body` issues, each with its layer (null: before the first; 'head';
   * 'mtp' for the MTP head's). */
  const capture = (start, body) => {
    const rec = [];
    const run = k.g.run;
    layer = start;
    k.g.run = function (_enc, key, source, params, _f32, _buffers, groups, label) {
      rec.push({ key, label, wgsl: source(), words: [...params], groups: [...groups], layer });
    };
    try { body(); } finally { k.g.run = run; }
    return rec;
  };
  const seqsOf = (n, t, verify) => {
    const kv = kvPool(n);
    const states = statesOf(n);
    return Array.from({ length: n }, (_, i) => ({ tokens: Array.from({ length: t }, (_, j) => 9 + j), start: 2, pageTable: Int32Array.from([i]), kv,
      state: states[i], scratch: verify ? scratchOf(t) : null, chunked: false }));
  };
  const forwardRows = (seqs) => {
    const { hidden, offsets } = forwardHidden(tapped, ws, seqs);
    const want = seqs.flatMap((s, i) => Array.from({ length: s.scratch ? s.tokens.length : 1 }, (_, j) => offsets[i] + (s.scratch ? j : s.tokens.length - 1)));
    layer = 'head';
    lmHeadInto(tapped, ws, hidden, want, ws.logits.rows(want.length));
  };
  return {
    model,
    kinds: model.weights.layers.map((l) => l.mixer.kind),
    /** A decode step of `streams` sequences, one row each (forward + lm_head of each row). */
    decode: (streams) => capture(null, () => forwardRows(seqsOf(streams, 1, false))),
    /** A verify step of one sequence of `t` rows (MTP k = t − 1): every row's logits. */
    verify: (t) => capture(null, () => forwardRows(seqsOf(1, t, true))),
    /** The MTP head over `rows` positions of one sequence (the extend), then nothing else. */
    mtp: (rows) => capture('mtp', () => {
      const hidden = ws.hidden.rows(rows);
      mtpForward(model, ws, [{ tokens: Array.from({ length: rows }, (_, j) => 9 + j), hidden, hiddenRow: 0, start: 2, pageTable: Int32Array.from([0]), kv: kvPool(1)[0] }]);
    }),
    /** The lm_head over `rows` rows (a draft step's logits). */
    head: (rows) => capture('head', () => lmHeadInto(model, ws, ws.hidden.rows(rows), Array.from({ length: rows }, (_, j) => j), ws.logits.rows(rows))),
  };
}

// GPU memory-access model of one decode step (batch 1) on webgpu: every dispatch model/forward
// issues (recorded on this machine's adapter, lavapipe works), with the bytes it must move,
// workgroups vs an H100/H200's 132 SMs, its weight loads' bytes and sectors per warp-load
// (src/kernels/webgpu/access-model.ts, derived from the WGSL), and an attainable fraction of
// DRAM bandwidth per dispatch and for the step. Not a measurement: docs/kernels.md
// "GPU memory-access model" lists the assumptions; the JSON repeats them.
// The shapes are recorded on a cut of the real shape (--layers decoder layers, a small
// vocabulary) and scaled: each layer kind's dispatches × the real count of that kind, the
// lm_head's rows to the real vocabulary. Needs dist/ (npx tsc).
//   node scripts/gpu-access-model.mjs [--shapes qwen3.5-4b,qwen3.5-0.8b] [--formats bf16,q8_0,q4_k_m]
//        [--gpu h100,h200] [--context 1024] [--work DIR] [--out FILE.json]
//        [--records FILE] (also write the raw recordings) [--from FILE] (model saved recordings: no adapter)
//        [--gdn-launch columns|head] (the GDN recurrence's launch to record: a GPU adapter's,
//        columns, by default; head is the one-workgroup-per-head kernel CPU adapters run)
//        [--conv-launch channels|thread] (the GDN causal conv's launch: a GPU adapter's,
//        channels, by default; thread is the 64-thread kernel CPU adapters run)
//        [--fold-quant-acts on|off] (an unnormed quantized matmul of M ≤ 4 quantizes its own
//        input: a GPU adapter's choice, on, by default; off is quant_acts + qmatmul, as CPU adapters)
import { parseArgs } from 'node:util';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { create, globals } from 'webgpu';
import { WebGpuBoundaryKernels } from '../dist/src/kernels/webgpu/kernels.js';
import { loadModel } from '../dist/src/model/model.js';
import { StepArena } from '../dist/src/model/arena.js';
import { forwardHidden, lmHeadInto } from '../dist/src/model/forward.js';
import { SHAPES } from '../dist/src/tools/model-shapes.js';
import { modelDispatch, stepSummary, ASSUMPTIONS } from './gpu-access-families.mjs';
import { GPUS, estimate } from '../dist/src/kernels/webgpu/access-model.js';

const { values } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'qwen3.5-4b,qwen3.5-0.8b' },
    formats: { type: 'string', default: 'bf16,q8_0,q4_k_m' },
    gpu: { type: 'string', default: 'h100,h200' },
    context: { type: 'string', default: '1024' },
    layers: { type: 'string', default: '4' },
    work: { type: 'string', default: '/tmp/gpu-access-model' },
    out: { type: 'string' },
    records: { type: 'string' },
    from: { type: 'string' },
    'gdn-launch': { type: 'string', default: 'columns' },
    'conv-launch': { type: 'string', default: 'channels' },
    'fold-quant-acts': { type: 'string', default: 'on' },
  },
});
const gpus = values.gpu.split(',').map((g) => {
  if (!Object.hasOwn(GPUS, g)) throw new Error(`--gpu: "${g}" is not one of ${Object.keys(GPUS).join(', ')}`);
  return GPUS[g];
});
const context = Number(values.context);
const cutLayers = Number(values.layers);
const REC_VOCAB = 4096;
for (const [k, v] of Object.entries(globals)) if (!(k in globalThis)) globalThis[k] = v;
// kept referenced: a collected GPU instance takes Dawn down with it (aborts, segfaults)
const dawn = values.from ? null : create([]);
const k = dawn ? await WebGpuBoundaryKernels.create(dawn, { allowCpuEmulation: true }) : null;
const gdnLaunch = values['gdn-launch'];
if (gdnLaunch !== 'columns' && gdnLaunch !== 'head') throw new Error(`--gdn-launch: "${gdnLaunch}" is not columns or head`);
const convLaunch = values['conv-launch'];
if (convLaunch !== 'channels' && convLaunch !== 'thread') throw new Error(`--conv-launch: "${convLaunch}" is not channels or thread`);
const foldActs = values['fold-quant-acts'];
if (foldActs !== 'on' && foldActs !== 'off') throw new Error(`--fold-quant-acts: "${foldActs}" is not on or off`);
// what a GPU adapter runs (kernels/webgpu/launches.ts), with the flags' choices
if (k) k.g.useLaunches('gpu', { gdnLaunch, convLaunch, foldQuantActs: foldActs === 'on' });

/** The cut checkpoint of `shape` in `format` (made once under --work). */
async function checkpoint(shape, format) {
  const dir = join(resolve(values.work), shape);
  const st = join(dir, 'st');
  // imported here: only when a checkpoint is missing
  const { makeModel } = await import('../dist/src/tools/make-model.js');
  const { quantizeToGguf } = await import('../dist/src/tools/quantize-gguf.js');
  // the built-in tokenizer, as the make-model CLI (quantize writes it into the GGUF)
  const { BUILTIN_MODEL } = await import('../dist/src/hub/builtin.js');
  if (!existsSync(join(st, 'config.json'))) {
    mkdirSync(dir, { recursive: true });
    await makeModel({ shape, dtype: 'bf16', seed: 1, out: st, layers: cutLayers, vocabSize: REC_VOCAB, layout: 'flat', tokenizer: BUILTIN_MODEL });
  }
  if (format === 'bf16') return st;
  const gguf = join(dir, `${format}.gguf`);
  if (!existsSync(gguf)) await quantizeToGguf({ model: st, out: gguf, type: format });
  return gguf;
}

/** The dispatches of one decode step at position 2 (after a 2-token prompt), each with its
 * layer (null: before the first or after the last) and its shader's text. */
async function recordStep(path) {
  const model = loadModel(resolve(path), k);
  const { layout } = model;
  const ws = new StepArena(model);
  // one sequence's paged KV (one 16-position page per full layer) and state, as the engine's
  const kvRows = 16 * layout.kvDim;
  const kv = () => { const t = k.alloc(2 * kvRows); return { k: k.view(t, 0, kvRows), v: k.view(t, kvRows, kvRows), pageSize: 16 }; };
  const pools = layout.linearLayers.map(() => ({ conv: k.alloc(layout.convSize), ssm: k.alloc(layout.ssmSize) }));
  const seq = { pageTable: Int32Array.from([0]), kv: layout.fullLayers.map(kv),
    state: pools.map((p) => ({ conv: k.view(p.conv, 0, layout.convSize), ssm: k.view(p.ssm, 0, layout.ssmSize) })) };
  // a 2-token prompt first, as the engine's prefill (a first read-back after a lone
  // 1-token step aborted Dawn on lavapipe here: the read-back pacer's first sleep)
  forwardHidden(model, ws, [{ ...seq, tokens: [7, 8], start: 0, chunked: true }]);
  await k.readBack([]);
  const rec = [];
  let layer = null;
  const layers = new Proxy(model.weights.layers, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && /^\d+$/.test(prop)) layer = Number(prop);
      return Reflect.get(target, prop, recv);
    },
  });
  const run = k.g.run;
  k.g.run = function (enc, key, source, params, f32, buffers, groups, label) {
    rec.push({ key, label, wgsl: source(), words: [...params], groups: [...groups], layer });
    return run.call(this, enc, key, source, params, f32, buffers, groups, label);
  };
  const t0 = performance.now();
  const weights = { ...model.weights, layers };
  Object.defineProperty(weights, 'finalNorm', { get() { layer = 'head'; return model.weights.finalNorm; } });
  const { hidden, offsets } = forwardHidden({ ...model, weights }, ws, [{ ...seq, tokens: [9], start: 2, chunked: false }]);
  layer = 'head';
  const logits = lmHeadInto(model, ws, hidden, offsets, ws.logits.rows(1));
  await k.readBack([{ t: logits, offset: 0, length: model.weights.lmHead.rows }]);
  const ms = performance.now() - t0;
  k.g.run = run;
  const kinds = model.weights.layers.map((l) => l.mixer.kind);
  return { rec, kinds, config: model.config, lavapipeStepMs: ms };
}

const recordings = [];
if (values.from) recordings.push(...JSON.parse(readFileSync(values.from, 'utf8')));
else {
  for (const shape of values.shapes.split(',')) {
    for (const format of values.formats.split(',')) recordings.push({ shape, format, ...await recordStep(await checkpoint(shape, format)) });
  }
}
if (values.records) writeFileSync(values.records, JSON.stringify(recordings));
const results = [];
for (const { shape, format, rec, kinds, config, lavapipeStepMs } of recordings) {
  const spec = SHAPES[shape];
  const realFull = Math.floor(spec.layers / spec.fullAttentionInterval);
  const real = { linear: spec.layers - realFull, full: realFull };
  {
    const cut = { linear: kinds.filter((x) => x === 'linear').length, full: kinds.filter((x) => x === 'full').length };
    const rows = [];
    for (const r of rec) {
      const kind = typeof r.layer === 'number' ? kinds[r.layer] : null;
      const times = kind ? real[kind] / cut[kind] : 1;
      const vocabScale = r.layer === 'head' && r.label.startsWith('matmul') ? spec.vocab / REC_VOCAB : 1;
      const d = modelDispatch(r, { context, vocabScale, config });
      rows.push({ key: r.key, label: r.label, where: kind ?? (r.layer === 'head' ? 'head' : 'embed'), times, d });
    }
    for (const gpu of gpus) results.push({ shape, format, gpu: gpu.name, ...stepSummary(rows, gpu, estimate), lavapipe_step_ms: +lavapipeStepMs.toFixed(1), cut_layers: cut });
  }
}
const out = { gpus, context, batch: 1, gdn_launch: values.from ? '(as recorded)' : gdnLaunch, conv_launch: values.from ? '(as recorded)' : convLaunch, assumptions: ASSUMPTIONS, adapter_recorded_on: k ? k.g.adapter.description || k.g.adapter.device : `(${values.from})`, results };
const text = JSON.stringify(out, null, 1);
if (values.out) writeFileSync(values.out, text + '\n');
console.log(text);
k?.dispose();
process.exit(0);

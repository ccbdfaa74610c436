// Dispatch census of the webgpu backend on model/forward (decode steps): dispatches per
// decoder layer by kind (linear / full attention), per step, and the host cost per
// dispatch (recording in JS + encoding/submitting in Dawn), for 1 and N streams.
// Prints one JSON object. Needs dist/ (npx tsc) and a WebGPU adapter (lavapipe works).
//   node scripts/webgpu-census.mjs [--model DIR] [--streams 1,8] [--steps 6]
//        [--dawn enable-dawn-features=skip_validation]   (Dawn toggles, repeatable)
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { create, globals } from 'webgpu';
import { WebGpuBoundaryKernels } from '../dist/src/kernels/webgpu/kernels.js';
import { loadModel } from '../dist/src/model/model.js';
import { StepArena } from '../dist/src/model/arena.js';
import { forwardHidden, lmHeadInto } from '../dist/src/model/forward.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '../shared/models/tiny-think' },
    streams: { type: 'string', default: '1,8' },
    steps: { type: 'string', default: '6' },
    prompt: { type: 'string', default: '24' },
    dawn: { type: 'string', multiple: true, default: [] },
  },
});
for (const [k, v] of Object.entries(globals)) if (!(k in globalThis)) globalThis[k] = v;
const gpu = create(values.dawn);
const k = await WebGpuBoundaryKernels.create(gpu, { allowCpuEmulation: true });
const model = loadModel(resolve(values.model), k);
const { layout, config } = model;
const steps = Number(values.steps);
const promptLen = Number(values.prompt);
const pageSize = 16;
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

/** Sequence memory for n streams sharing one paged KV pool (as the engine's). */
function memory(n, capacity) {
  const pagesPer = Math.ceil(capacity / pageSize);
  const kv = () => {
    const rows = n * pagesPer * pageSize * layout.kvDim;
    const t = k.alloc(2 * rows);
    return { k: k.view(t, 0, rows), v: k.view(t, rows, rows), pageSize };
  };
  const kvLayers = layout.fullLayers.map(kv);
  // one state pool per layer, a slot per stream (as the engine's state pool)
  const pools = layout.linearLayers.map(() => ({ conv: k.alloc(n * layout.convSize), ssm: k.alloc(n * layout.ssmSize) }));
  return Array.from({ length: n }, (_, s) => ({
    pageTable: Int32Array.from({ length: pagesPer }, (_, i) => s * pagesPer + i),
    kv: kvLayers,
    state: pools.map((p) => ({ conv: k.view(p.conv, s * layout.convSize, layout.convSize), ssm: k.view(p.ssm, s * layout.ssmSize, layout.ssmSize) })),
  }));
}

/** A model whose layer list reports the recorded dispatch count as each layer begins. */
function censusModel(marks) {
  const layers = new Proxy(model.weights.layers, {
    get(target, prop, recv) {
      if (typeof prop === 'string' && /^\d+$/.test(prop)) marks.push({ layer: Number(prop), at: k.recordedDispatches });
      return Reflect.get(target, prop, recv);
    },
  });
  return { ...model, weights: { ...model.weights, layers } };
}

async function run(n) {
  const ws = new StepArena(model);
  const seqs = memory(n, promptLen + steps + 8);
  const ids = (t, s) => Array.from({ length: t }, (_, i) => (7 + 13 * i + 31 * s) % config.vocabSize);
  forwardHidden(model, ws, seqs.map((s, i) => ({ ...s, tokens: ids(promptLen, i), start: 0, chunked: true })));
  await k.readBack([]);
  const per = { linear: [], full: [] };
  const stepDispatches = [];
  const recordMs = [];
  const encodeMs = [];
  const wallMs = [];
  for (let step = 0; step < steps; step++) {
    const marks = [];
    const d0 = k.recordedDispatches;
    const e0 = k.counters.encodeMs;
    const t0 = performance.now();
    const { hidden, offsets } = forwardHidden(censusModel(marks), ws, seqs.map((s, i) => ({ ...s, tokens: ids(1, i + step), start: promptLen + step, chunked: false })));
    const logits = lmHeadInto(model, ws, hidden, offsets, ws.logits.rows(n));
    const t1 = performance.now();
    const end = k.recordedDispatches;
    await k.readBack([{ t: logits, offset: 0, length: n * model.weights.lmHead.rows }]);
    wallMs.push(performance.now() - t0);
    recordMs.push(t1 - t0);
    encodeMs.push(k.counters.encodeMs - e0);
    stepDispatches.push(end - d0);
    const layerMarks = marks.filter((m, i) => marks.findIndex((x) => x.layer === m.layer) === i);
    layerMarks.forEach((m, i) => {
      const next = layerMarks[i + 1]?.at ?? null;
      if (next === null) return; // the last layer's end is the final norm's start: not marked
      per[layout.linearLayers.includes(m.layer) ? 'linear' : 'full'].push(next - m.at);
    });
  }
  const d = median(stepDispatches);
  return {
    streams: n,
    dispatchesPerStep: d,
    dispatchesPerLayer: { linear: median(per.linear), full: median(per.full) },
    hostUsPerDispatch: { record: +(1000 * median(recordMs) / d).toFixed(1), encodeSubmit: +(1000 * median(encodeMs) / d).toFixed(1) },
    stepMs: { record: +median(recordMs).toFixed(2), encodeSubmit: +median(encodeMs).toFixed(2), wall: +median(wallMs).toFixed(2) },
  };
}

const out = { model: values.model, adapter: k.g.adapter.description || k.g.adapter.device, dawn: values.dawn, node: process.version, runs: [] };
for (const n of values.streams.split(',').map(Number)) out.runs.push(await run(n));
console.log(JSON.stringify(out, null, 1));
k.dispose();

// Deepstack injection in the forward (model/forward.ts): feature j of an image row is added
// to that row's residual stream right after decoder layer j. On the tiny-vision text model
// (2 layers, ref): a feature after the last layer changes only its row, by exactly +f (f32
// sums); a feature after layer 0 leaves the rows before it bit-identical (causality) and
// changes its row and the rows after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createKernels } from '../src/kernels/index.js';
import { StepArena } from '../src/model/arena.js';
import { forwardHidden, type ImageRow } from '../src/model/forward.js';
import { allocSequenceMemory, loadModel } from '../src/model/model.js';
import { TINY_VISION } from './vision-helpers.js';

const IDS = [996, 271, 10, 1000, 1003, 1003, 1001, 11, 12];
const ROW = 4; // the first pad

async function residual(deepstack: (Float32Array | undefined)[]): Promise<{ x: Float32Array; hidden: Float32Array }> {
  const k = await createKernels('ref');
  const model = loadModel(TINY_VISION, k);
  const h = model.config.hiddenSize;
  const ws = new StepArena(model);
  const mem = allocSequenceMemory(model, IDS.length + 1);
  const values = Float32Array.from({ length: h }, (_, i) => Math.cos(i));
  // an absent entry: no feature after that layer (addDeepstack skips it)
  const row: ImageRow = { row: ROW, values, deepstack: deepstack as Float32Array[] };
  const positions = new Int32Array(3 * IDS.length).map((_, i) => i % IDS.length);
  const fw = forwardHidden(model, ws, [{
    tokens: IDS, start: 0, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: true,
    vision: { mrope: { positions, pairAxes: new Uint8Array(model.config.rotaryDim / 2) }, rows: [row] },
  }]);
  const m = IDS.length;
  return { x: (ws.x.rows(m) as Float32Array).slice(0, m * h), hidden: (fw.hidden as Float32Array).slice(0, m * h) };
}

test('deepstack after the last layer: its row of the residual gains exactly f, nothing else moves', async () => {
  const h = 64;
  const f = Float32Array.from({ length: h }, (_, i) => 0.01 * (i - 32));
  const base = await residual([]);
  const last = await residual([undefined, f]);
  for (let r = 0; r < IDS.length; r++) {
    const [a, b] = [base.x.subarray(r * h, (r + 1) * h), last.x.subarray(r * h, (r + 1) * h)];
    if (r === ROW) assert.deepEqual(b, a.map((v, i) => Math.fround(v + f[i]!)));
    else assert.deepEqual(b, a, `row ${r} unchanged`);
  }
});

test('deepstack after layer 0: rows before the image unchanged, its row and later ones changed', async () => {
  const h = 64;
  const f = Float32Array.from({ length: h }, (_, i) => 0.05 * Math.sin(i));
  const base = await residual([]);
  const first = await residual([f]);
  for (let r = 0; r < IDS.length; r++) {
    const same = base.hidden.subarray(r * h, (r + 1) * h).every((v, i) => v === first.hidden[r * h + i]);
    assert.equal(same, r < ROW, `row ${r}`);
  }
});

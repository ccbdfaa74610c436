import { create, globals } from 'webgpu';
for (const [k, v] of Object.entries(globals)) if (!(k in globalThis)) globalThis[k] = v;
const D = process.argv[2];
const { WebGpuBoundaryKernels } = await import(`${D}/src/kernels/webgpu/kernels.js`);
const { benchOnce } = await import(`${D}/src/cli/bench-run.js`);
const { loadModel } = await import(`${D}/src/model/model.js`);
const { Rng } = await import(`${D}/src/util/rng.js`);
const { StepEncoder } = await import(`${D}/src/kernels/webgpu/encoder.js`);
const dawn = create([]);
const k = await WebGpuBoundaryKernels.create(dawn, { allowCpuEmulation: true });
for (const path of process.argv.slice(3)) {
  const m = await loadModel(path, k);
  const counts = new Map();
  const dispatch = StepEncoder.prototype.dispatch;
  let on = false;
  StepEncoder.prototype.dispatch = function (...a) { if (on) { const key = a[5]; counts.set(key, (counts.get(key) ?? 0) + 1); } dispatch.apply(this, a); };
  const run = await benchOnce(m, 'decode', 1, 3, 2, 1, new Rng(5), () => { on = true; });
  StepEncoder.prototype.dispatch = dispatch;
  let total = 0;
  const rows = [...counts].map(([l, n]) => { total += n / run.steps; return `${l}: ${n / run.steps}`; });
  console.log(path.split('/').pop(), 'dispatches per step', total, '\n ', rows.join('\n  '));
}
k.dispose();
process.exit(0);

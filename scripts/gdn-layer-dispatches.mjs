// The dispatches of one Gated DeltaNet layer in a decode step (one sequence, one row), as a
// GPU adapter launches them (recorded on any adapter, nothing executed: the launches forced as
// scripts/gpu-batch-model.mjs forces them), for each checkpoint given:
//   node scripts/gdn-layer-dispatches.mjs DIR_OR_GGUF...
// Prints per checkpoint the labels of the first linear layer's dispatches and their count.
import { create, globals } from 'webgpu';
import { WebGpuBoundaryKernels } from '../dist/src/kernels/webgpu/kernels.js';
import { forceGdnLaunch } from '../dist/src/kernels/webgpu/gdn-columns.js';
import { forceConvLaunch } from '../dist/src/kernels/webgpu/conv-launch.js';
import { FLOAT_COLUMNS } from '../dist/src/kernels/webgpu/wgsl/matmul-columns.js';
import { recorder } from './gpu-batch-record.mjs';

for (const [key, v] of Object.entries(globals)) if (!(key in globalThis)) globalThis[key] = v;
const dawn = create([]);
const k = await WebGpuBoundaryKernels.create(dawn, { allowCpuEmulation: true });
forceGdnLaunch(k.g, 'columns');
forceConvLaunch(k.g, 'channels');
k.g.foldQuantActs = true;
k.g.quantLayout = 'lanes';
k.g.actsLayout = 'lanes';
k.g.floatColumns = FLOAT_COLUMNS;
for (const path of process.argv.slice(2)) {
  const r = recorder(k, path);
  const first = r.kinds.indexOf('linear');
  for (const streams of [1, 2]) {
    const layer = r.decode(streams).filter((d) => d.layer === first);
    console.log(`${path} decode M=${streams}: ${layer.length} dispatches in linear layer ${first}: ${layer.map((d) => d.label).join(' | ')}`);
  }
}
k.dispose();
void dawn;

// scripts/gpu-bench.sh's first step: which WebGPU adapter Dawn gives the benches (the same
// acquisition as `--kernels webgpu`), with its limits and features, as one JSON line.
// Usage: node gpu-bench-probe.mjs APP_DIR   (APP_DIR holds dist/src and node_modules)
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const app = process.argv[2];
if (!app) throw new Error('usage: gpu-bench-probe.mjs APP_DIR');
const mod = (p) => import(pathToFileURL(join(app, 'dist', 'src', ...p.split('/'))).href);
const { nodeGpu } = await mod('kernels/webgpu-node.js');
const { acquireGpu, describeAdapter } = await mod('kernels/webgpu/device.js');
const gpu = await nodeGpu();
// what each power preference returns (a machine with lavapipe beside the GPU shows both)
const offered = [];
for (const powerPreference of ['high-performance', 'low-power']) {
  const a = await gpu.requestAdapter({ powerPreference });
  offered.push({ powerPreference, adapter: a ? `${a.info.vendor} ${a.info.architecture} "${a.info.description || a.info.device}"` : null });
}
const ctx = await acquireGpu(gpu, { allowCpuEmulation: true });
process.stdout.write(`${JSON.stringify({ adapter: ctx.adapter, line: describeAdapter(ctx.adapter), offered })}\n`);
ctx.device.destroy();
process.exit(0);

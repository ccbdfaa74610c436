// The webgpu device layer: CPU-emulation detection (what `auto` refuses), adapter
// description, the adapter's limits on the device, weight row-splitting arithmetic, the
// encoder's copies and read-backs, and every WGSL variant compiling without error.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { describeAdapter, isCpuEmulation, probeAuto } from '../src/kernels/webgpu/device.js';
import { launchProfile, nodeGpu } from '../src/kernels/webgpu-node.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { adapterProfile, launchesOf, type Launches } from '../src/kernels/webgpu/launches.js';
import { gpuRowBytes, rowsPerPart } from '../src/kernels/webgpu/weights.js';
import { QUANT_TYPES } from '../src/kernels/quant/formats.js';
import { mtpInputsShader } from '../src/kernels/webgpu/wgsl/mtp-inputs.js';
import { quantActsShader, quantMatmulShader } from '../src/kernels/webgpu/wgsl/matmul.js';
import { floatMatmulGroupShader } from '../src/kernels/webgpu/wgsl/matmul-group.js';
import { floatColumnsShader } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import { ARGMAX, ELEMENTWISE, MOE_ROUTE, NORM, ROPE, embedFloatShader, embedQuantShader } from '../src/kernels/webgpu/wgsl/dense.js';
import { CAUSAL_CONV, GDN_GATES, GDN_RECURRENT } from '../src/kernels/webgpu/wgsl/gdn.js';
import { FILL_RUNS } from '../src/kernels/webgpu/fill-runs.js';
import { GDN_CHUNKED, GDN_CHUNKED_SEQS } from '../src/kernels/webgpu/wgsl/gdn-chunked.js';
import { ATTENTION, KV_WRITE } from '../src/kernels/webgpu/wgsl/attention.js';
import { ADD_SIGMOID_SCALED, COPY_ROWS, FILL, GATHER_ROWS, MOE_COMBINE, MOE_SCATTER } from '../src/kernels/webgpu/wgsl/rows.js';
import { SAMPLE } from '../src/kernels/webgpu/wgsl/sample.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

describe('webgpu device layer', () => {
  test('CPU emulations are recognised; real GPUs are not', () => {
    const info = (vendor: string, architecture: string, device: string, description: string, isFallbackAdapter?: boolean) =>
      ({ vendor, architecture, device, description, ...(isFallbackAdapter !== undefined ? { isFallbackAdapter } : {}) });
    assert.ok(isCpuEmulation(info('mesa', 'software', 'llvmpipe-llvm-15', 'llvmpipe: Mesa 25.0.7')));
    assert.ok(isCpuEmulation(info('google', '', 'SwiftShader Device (Subzero)', '')));
    assert.ok(isCpuEmulation(info('microsoft', '', 'Microsoft Basic Render Driver', '')));
    assert.ok(isCpuEmulation(info('nvidia', 'ampere', 'x', 'y', true)), 'a fallback adapter');
    assert.ok(!isCpuEmulation(info('nvidia', 'ampere', 'NVIDIA GeForce RTX 3080', 'NVIDIA GeForce RTX 3080')));
    assert.ok(!isCpuEmulation(info('apple', 'metal-3', 'Apple M2', '')));
    assert.ok(!isCpuEmulation(info('amd', 'rdna-3', 'AMD Radeon RX 7900 XTX (RADV NAVI31)', '')));
    assert.ok(!isCpuEmulation(info('intel', 'xe-lpg', 'Intel(R) Arc(tm) Graphics (MTL)', '')));
  });

  test('auto: a CPU emulation is refused with the reason, a real GPU is picked', async () => {
    const auto = await probeAuto(await nodeGpu());
    if (g.adapter.cpuEmulation) {
      assert.equal(auto.pick, 'cpu');
      assert.match(auto.reason, /CPU emulation/);
    } else {
      assert.equal(auto.pick, 'webgpu');
      assert.equal(auto.adapter?.description, g.adapter.description);
    }
    assert.deepEqual(await probeAuto(null), { pick: 'cpu', reason: 'no WebGPU implementation', adapter: null });
  });

  test('without the optional package "webgpu", the error names it and how to install it', async () => {
    await assert.rejects(nodeGpu(() => Promise.reject(new Error("Cannot find package 'webgpu'"))),
      /optional npm package "webgpu".*Cannot find package 'webgpu'.*npm install webgpu@0\.6\.2.*--kernels cpu/);
  });

  test('the device carries the adapter limits, and the adapter line names it', () => {
    const a = g.adapter;
    assert.equal(g.device.limits.maxStorageBufferBindingSize, a.limits.maxStorageBufferBindingSize);
    assert.ok(a.limits.maxBufferSize >= a.limits.maxStorageBufferBindingSize);
    const line = describeAdapter(a);
    assert.match(line, /binding \d+ MiB, buffer \d+ MiB, features /);
    if (a.cpuEmulation) assert.match(line, /\(CPU emulation\)/);
  });

  test('launch profiles: a backend takes its adapter\'s, AcquireOptions.launches the other (foldQuantActs over it), useLaunches overrides single choices', async () => {
    const adapters = adapterProfile(g.adapter.cpuEmulation);
    const own = launchProfile() ?? adapters; // DELTASERVE_LAUNCHES, as gpuUnderTest reads it
    const pick = (k: WebGpuKernels): Launches => Object.fromEntries(Object.keys(launchesOf('gpu')).map((n) => [n, k[n as keyof Launches]])) as unknown as Launches;
    assert.deepEqual(pick(g), launchesOf(own));
    const other = own === 'cpu' ? 'gpu' : 'cpu';
    const k = await gpuUnderTest({ launches: other, foldQuantActs: own !== 'cpu' });
    try {
      assert.deepEqual(pick(k), { ...launchesOf(other), foldQuantActs: own !== 'cpu' });
      k.useLaunches('adapter', { floatColumns: 4, gdnLaunch: 'columns' });
      assert.deepEqual(pick(k), { ...launchesOf(adapters), floatColumns: 4, gdnLaunch: 'columns' });
      // every choice differs between the two profiles (else it is no choice of the adapter's),
      // but the float columns' count: the rows it starts from and its accumulators differ
      for (const [n, v] of Object.entries(launchesOf('gpu'))) {
        if (n === 'floatColumns') assert.equal(v, launchesOf('cpu').floatColumns, n);
        else assert.notDeepEqual(v, launchesOf('cpu')[n as keyof Launches], n);
      }
    } finally {
      k.dispose();
    }
  });

  test('row split: parts hold whole rows within the binding limit', () => {
    for (const dtype of ['bf16', 'f32', ...QUANT_TYPES] as const) {
      const cols = 4096;
      const rb = gpuRowBytes(dtype, cols);
      const per = rowsPerPart(rb, 128 * 2 ** 20);
      assert.ok(per * rb <= 128 * 2 ** 20 && (per + 1) * rb > 128 * 2 ** 20, dtype);
    }
    assert.throws(() => rowsPerPart(1000, 999), /exceeds the storage binding limit/);
  });

  test('encoder: copies run in order with dispatches; one submit, several read-backs', async () => {
    const a = g.alloc.upload(Float32Array.from([1, 2, 3, 4]));
    const b = g.alloc.tensor([4]);
    const c = g.alloc.tensor([4]);
    const [rb, rc] = await run(g, (e) => {
      g.add(e, b, a, a, 4); // b = 2a
      e.copy(b, c); // c = 2a
      g.add(e, c, c, a, 4); // c = 3a
      g.add(e, b, b, b, 4); // b = 4a, after the copy
    }, b, c);
    assert.deepEqual([...rb], [4, 8, 12, 16]);
    assert.deepEqual([...rc], [3, 6, 9, 12]);
  });

  test('every WGSL variant compiles', async () => {
    const sources: [string, string][] = [
      ['quant_acts', quantActsShader(true)], ['quant_acts_nodot4', quantActsShader(false)], ['norm', NORM], ['elementwise', ELEMENTWISE], ['rope', ROPE], ['argmax', ARGMAX],
      ['moe_route', MOE_ROUTE], ['moe_scatter', MOE_SCATTER], ['moe_combine', MOE_COMBINE], ['causal_conv', CAUSAL_CONV], ['gdn_gates', GDN_GATES], ['gdn_recurrent', GDN_RECURRENT], ['gdn_chunked', GDN_CHUNKED], ['gdn_chunked_seqs', GDN_CHUNKED_SEQS],
      ['kv_write', KV_WRITE], ['attention', ATTENTION], ['sample', SAMPLE],
      ['copy_rows', COPY_ROWS], ['fill', FILL], ['fill_runs', FILL_RUNS], ['gather_rows', GATHER_ROWS], ['add_sigmoid_scaled', ADD_SIGMOID_SCALED],
      ...(['f32', 'bf16', 'f16'] as const).flatMap((d): [string, string][] => [[`matmul_${d}`, floatMatmulGroupShader(d, 1)], [`matmul_group_${d}`, floatMatmulGroupShader(d, 4)], [`embed_${d}`, embedFloatShader(d)]]),
      ...(g.adapter.features.subgroups ? (['f32', 'bf16', 'f16'] as const).map((d): [string, string] => [`matmul_${d}_sg`, floatMatmulGroupShader(d, 3, true)]) : []),
      // the multi-column float matmuls (wgsl/matmul-columns.ts): plain, accumulating + scalar x, normed, gated, subgroups
      ...(['f32', 'bf16', 'f16'] as const).flatMap((d): [string, string][] => [[`matmul_cols_${d}`, floatColumnsShader(d, 4, false, false)],
        [`matmul_cols_${d}_acc_vec4w`, floatColumnsShader(d, 2, false, true, 32, false, 4)], [`matmul_cols_${d}_norm`, floatColumnsShader(d, 3, false, false, 16, true, 4, true)],
        [`matmul_cols_${d}_silu`, floatColumnsShader(d, 1, false, true, 16, true, 4, false, 'silu')]]),
      ...(g.adapter.features.subgroups ? (['f32', 'bf16'] as const).map((d): [string, string] => [`matmul_cols_${d}_sg`, floatColumnsShader(d, 2, true, false)]) : []),
      // the float matmuls' other load widths (wgsl/float-chunks.ts): scalar inputs, element loads
      ...(['f32', 'bf16', 'f16'] as const).flatMap((d): [string, string][] => [[`matmul_${d}_vec4w`, floatMatmulGroupShader(d, 2, false, true, false, 'sigmoid', null, false, 16, 'vec4w')],
        [`matmul_${d}_norm_vec4w`, floatMatmulGroupShader(d, 2, false, false, true, null, null, false, 16, 'vec4w')],
        [`matmul_${d}_element`, floatMatmulGroupShader(d, 2, false, false, true, null, null, false, 16, 'element')]]),
      ...QUANT_TYPES.flatMap((q): [string, string][] => [[`qmatmul_${q}`, quantMatmulShader(q, true)], [`qmatmul_${q}_nodot4`, quantMatmulShader(q, false)], [`embed_${q}`, embedQuantShader(q)]]),
      // the 32- and 64-row tiles (wgsl/matmul.ts matmulTile; 64 where the workgroup memory allows)
      ...[32, 64].filter((tm) => tm * 512 <= g.device.limits.maxComputeWorkgroupStorageSize).flatMap((tm): [string, string][] => [
        [`qmatmul_q4_k_tm${tm}`, quantMatmulShader('q4_k', true, true, null, false, tm)], [`qmatmul_q8_0_tm${tm}`, quantMatmulShader('q8_0', false, false, null, false, tm)],
        [`matmul_bf16_norm_tm${tm}`, floatMatmulGroupShader('bf16', 4, false, false, true, null, null, false, tm)],
        [`matmul_f16_silu_tm${tm}`, floatMatmulGroupShader('f16', 2, g.adapter.features.subgroups, true, false, 'silu', null, false, tm)]]),
      // the MTP head's inputs (wgsl/mtp-inputs.ts), every table type
      ...(['f32', 'bf16', 'f16', ...QUANT_TYPES] as const).map((d): [string, string] => [`mtp_inputs_${d}`, mtpInputsShader(d)]),
    ];
    const errors = (await Promise.all(sources.map(([k, s]) => g.pipelines.errors(k, s)))).flat();
    assert.deepEqual(errors, []);
  });
});

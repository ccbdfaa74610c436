// The GPU memory-access model (kernels/webgpu/access-model.ts, scripts/gpu-access-model.mjs):
// its weight-load sites must be the shaders' own (a shader change that moves a load fails
// here until the model follows), its parameter decoding must invert packParams, and its
// bounds must move the right way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  GPUS, estimate, floatInputLoads, floatWeightLoads, gdnStageLoads, loadFacts, namedParams, quantActLoads, quantActsIteration, quantFusedActLoads, quantIteration, quantWeightLoads,
  warpIteration, workgroupBytes, workgroupSize,
  type ModelledDispatch,
} from '../src/kernels/webgpu/access-model.js';
import { floatMatmulGroupShader } from '../src/kernels/webgpu/wgsl/matmul-group.js';
import { quantMatmulShader } from '../src/kernels/webgpu/wgsl/matmul.js';
import { quantMatmulActsShader } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { packParams } from '../src/kernels/webgpu/params.js';
import { GDN_COLUMNS, GDN_COLUMN_THREADS, GDN_GATED_COLUMNS, GDN_STAGE_LOADS } from '../src/kernels/webgpu/wgsl/gdn-columns.js';
import { convChannelLoads } from '../src/kernels/webgpu/access-model.js';
import { CONV_CHANNEL_THREADS, convChannelsShader } from '../src/kernels/webgpu/wgsl/gdn.js';

test('float weight loads mirror matmul-group.ts: thread t reads the 4-element units u ≡ t (mod 64) of its row through wu, two an iteration', () => {
  const src = floatMatmulGroupShader('bf16', 1, true, false, true);
  assert.match(src, /let ku = K \/ 4u;\s+for \(var u0 = t; u0 < ku; u0 \+= 128u\) \{\s+let u1 = u0 \+ 64u;\s+let has1 = u1 < ku;\s+let w0 = seg_wu\(sg, col \* ku \+ u0\);\s+var w1 = vec4<f32>\(0.0\);\s+if \(has1\) \{ w1 = seg_wu\(sg, col \* ku \+ u1\); \}/);
  // the segment's own reader (one segment: the dispatcher's only arm)
  assert.match(src, /fn seg_wu\(sg: u32, u: u32\) -> vec4<f32> \{\s+return wu0\(u\);\s+\}/);
  assert.match(src, /var<storage, read_write> W0: array<vec2<u32>>;\nfn wu0\(u: u32\) -> vec4<f32> \{ let q = W0\[u\];/);
  assert.match(src, /let x0 = xq\(xo \+ 4u \* u0\);[^]*let x1 = xq\(xo \+ 4u \* u1\);/);
  assert.match(src, /fn xq\(i: u32\) -> vec4<f32> \{ return X\[i >> 2u\]; \}/);
  assert.match(floatMatmulGroupShader('f32', 1), /W0: array<vec4<u32>>;\nfn wu0\(u: u32\) -> vec4<f32> \{ return bitcast<vec4<f32>>\(W0\[u\]\); \}/);
  const bf16 = floatWeightLoads('bf16', 2560).map((l) => loadFacts(l));
  assert.deepEqual(bf16.map((f) => [f.bytes, f.sectors.size]), [[256, 8], [256, 8]]); // 32 lanes × 8 bytes, contiguous; two loads an iteration
  const f32 = floatWeightLoads('f32', 2560).map((l) => loadFacts(l));
  assert.deepEqual(f32.map((f) => [f.bytes, f.sectors.size]), [[512, 16], [512, 16]]);
  // x per row: a vec4<f32> per unit, 32 lanes contiguous (16 sectors); as scalars, four loads a unit
  assert.deepEqual(floatInputLoads('bf16', 'vec4').map((l) => loadFacts(l).sectors.size), [16, 16]);
  assert.equal(floatInputLoads('bf16', 'vec4w').length, 8);
  assert.equal(warpIteration(floatWeightLoads('bf16', 2560), floatInputLoads('bf16', 'vec4')).dramBytes, 512);
});

test('float element loads (K not a multiple of the chunk) mirror the element path: thread t reads element k ≡ t (mod 64) through wf', () => {
  const src = floatMatmulGroupShader('bf16', 1, true, false, true, null, null, false, 16, 'element');
  assert.match(src, /for \(var k = t; k < K; k \+= 64u\)/);
  assert.match(src, /let w = seg_wf\(sg, col \* K \+ k\);/);
  assert.match(src, /fn seg_wf\(sg: u32, i: u32\) -> f32 \{\s+return wf0\(i\);\s+\}/);
  assert.match(src, /fn wf0\(i: u32\) -> f32 \{ let word = W0\[i >> 1u\];/);
  const bf16 = loadFacts(floatWeightLoads('bf16', 2560, 'element')[0]!);
  assert.deepEqual([bf16.bytes, bf16.sectors.size], [64, 2]); // 32 lanes, 16 words: half an ideal 128-byte warp-load
  const f32 = loadFacts(floatWeightLoads('f32', 2560, 'element')[0]!);
  assert.deepEqual([f32.bytes, f32.sectors.size], [128, 4]);
});

test('quantized weight loads mirror quant.ts and the tiled body: 8 lanes per block, lane t reads word t & 7 of block (t >> 3) + 8i', () => {
  const src = quantMatmulShader('q8_0', true);
  assert.match(src, /let w = t & 7u;/);
  assert.match(src, /let j = c0 \+ \(t >> 3u\) \+ 8u \* i;\s+if \(j < nb\) \{\s+qw\[i\] = packed_word\(row, j, w\);/);
  assert.match(src, /let a = QX\[\(xr \* K \+ j \* 32u\) \/ 4u \+ w\];/);
  assert.match(src, /let p = row \+ j \* 34u;\s+return word_at\(p \+ 2u \+ 4u \* w\);/);
  assert.match(src, /let sb = packed_head\(row, j\);/);
  const q4src = quantMatmulShader('q4_k', true);
  assert.match(q4src, /let qs = p \+ 16u \+ \(s >> 1u\) \* 32u;\s+let sh = \(s & 1u\) \* 4u;\s+return \(word_at\(qs \+ 4u \* w\) >> sh\) & 0x0f0f0f0fu;/);
  assert.match(quantMatmulShader('q6_k', true), /let sc = packed_q6\(row, j\);/);
  // Q8_0, first word load of warp 0: blocks 0..3, lane w reads bytes p + 2 + 4w: 4 blocks' consecutive bytes
  const first = loadFacts(quantWeightLoads('q8_0', 2720)[0]!);
  assert.equal(first.bytes, 128);
  assert.ok(first.sectors.size <= 6, `Q8_0 sectors of a warp's word load ${first.sectors.size}`);
  const q8 = quantIteration('q8_0', 2720);
  assert.ok(q8.sectorsPerLoad < 8, `Q8_0 sectors per warp-load ${q8.sectorsPerLoad}`); // was ~25 (lane j: block j)
  assert.equal(q8.dramBytes, (32 * Math.ceil((2720 + 64 * 34) / 32) - 32 * Math.floor(2720 / 32)) / 2); // the chunk's 64 blocks, once, per warp
  // activation words: lane-consecutive (4 sectors per warp-load)
  assert.deepEqual(quantActLoads('q8_0').slice(0, 1).map((l) => loadFacts(l).sectors.size), [4]);
  const q4 = quantIteration('q4_k', 1440);
  assert.equal(q4.dramBytes, (8 * 144) / 2); // 8 super-blocks of 144 bytes (32-byte aligned rows), per warp
  // the L1 sectors per DRAM sector: the strided layout had ~21 (Q8_0); the lanes now share blocks
  assert.ok(q8.l1Sectors / (q8.dramBytes / 32) < 8, `Q8_0 L1 sectors per DRAM sector ${q8.l1Sectors / (q8.dramBytes / 32)}`);
});

test('the activation-quantizing matmul\'s input loads mirror qmatmul-acts.ts: lane w reads elements 4w..4w+3 of its blocks, twice', () => {
  const src = quantMatmulActsShader('q8_0', true, false, 'silu');
  assert.match(src, /let e = \(m0 \+ r\) \* K \+ j \* 32u \+ 4u \* w;/);
  assert.equal(src.match(/let y = act4\(e\);/g)?.length, 2, 'act4 in the max pass and in the quantizing pass');
  assert.match(src, /fn act4\(e: u32\) -> vec4<f32> \{ return vec4<f32>\(act_at\(e\), act_at\(e \+ 1u\), act_at\(e \+ 2u\), act_at\(e \+ 3u\)\); \}/);
  assert.match(src, /let a = X\[pu\(P_xOff\) \+ e\];\s+let g = GB\[pu\(P_gateOff\) \+ e\];/);
  // vec4 loads: one vec4<f32> of x and of the gate a lane
  assert.match(quantMatmulActsShader('q8_0', true, false, 'silu', 8, true), /let a = x4\(pu\(P_xOff\) \+ e\);\s+let g = g4\(pu\(P_gateOff\) \+ e\);/);
  // a warp-load: 4 blocks of 128 bytes, one f32 per lane at a 16-byte stride: 16 sectors; a vec4 load the same 16 for 4 elements
  assert.deepEqual(loadFacts(quantFusedActLoads(false)[0]!).sectors.size, 16);
  assert.equal(quantFusedActLoads(true).length, 2 * quantFusedActLoads(false).length);
  assert.equal(quantFusedActLoads({ vec: true }).length, quantFusedActLoads(false).length / 4);
  assert.deepEqual(loadFacts(quantFusedActLoads({ vec: true })[0]!).sectors.size, 16);
  // a norm: its weight in both passes and the inv pass (32 coalesced loads a warp)
  assert.equal(quantFusedActLoads({ norm: true }).length, 2 * quantFusedActLoads(false).length + 32);
  const fused = quantActsIteration('q8_0', 2720, true);
  const split = quantIteration('q8_0', 2720);
  assert.equal(fused.dramBytes, split.dramBytes);
  assert.ok(fused.l1Sectors > 4 * split.l1Sectors, 'the f32 input costs L1 sectors the int8 words did not');
  // C columns: each column's weights, the input once
  const cols = quantActsIteration('q8_0', 2720, true, 8);
  assert.equal(cols.dramBytes, 8 * fused.dramBytes);
  const weightL1 = [0, 1].reduce((a, w) => a + quantWeightLoads('q8_0', 2720, w).reduce((b, l) => b + loadFacts(l).sectors.size, 0), 0) / 2;
  assert.equal(cols.l1Sectors - fused.l1Sectors, 7 * weightL1);
});

test('namedParams inverts packParams through the shader text', () => {
  const values = { rows: 9216, k: 2560, m: 1, outOff: 7, outStride: 9216, col0: 0, rowBytes: 2720, expert: 0, experts: 0, tiles: 1 };
  const src = quantMatmulShader('q8_0', true);
  assert.deepEqual(namedParams(src, packParams('qmatmul', values)), values);
  assert.equal(workgroupSize(src), 64);
  assert.equal(workgroupBytes(src), 16 * 64 * 4); // the integer sums, then the f32 terms in their words (atomics)
  assert.equal(workgroupBytes(quantMatmulShader('q4_k', true)), 2 * 16 * 64 * 4);
});

test('estimate: many workgroups with enough in flight reach the DRAM bound; few do not; unroll helps', () => {
  const it = warpIteration(floatWeightLoads('bf16', 2560, 'element'), []);
  const d: ModelledDispatch = { key: 'm', bytes: 9216 * 2560 * 2, workgroups: 9216, threadsPerWorkgroup: 64, workgroupBytes: 4096, iteration: it, unroll: 1 };
  const gpu = GPUS.h100;
  const one = estimate(d, gpu);
  const four = estimate({ ...d, unroll: 4 }, gpu);
  assert.equal(one.warpsPerSm, 64);
  assert.ok(four.fraction > one.fraction);
  const wide = estimate({ ...d, iteration: { ...it, dramBytes: 512 }, unroll: 4 }, gpu);
  assert.equal(wide.bound, 'dram');
  const few = estimate({ ...d, workgroups: 4 }, gpu);
  assert.equal(few.smsBusy, 4);
  assert.ok(few.fraction < 0.05);
});

test('GDN column launch: the state staging mirrors gdn-columns.ts, 128-byte warp-loads, the whole block in one iteration', () => {
  const src = GDN_GATED_COLUMNS;
  assert.match(src, /for \(var e0 = t; e0 < n; e0 \+= 16u \* WG\)/);
  assert.match(src, /let e = e0 \+ j \* WG; if \(e < n && c0 \+ e % CB < dv\) \{ v\[j\] = S\[sto \+ so \+ \(e \/ CB\) \* dv \+ c0 \+ e % CB\]; \}/);
  assert.match(src, /let c0 = wid\.y \* CB;/);
  assert.equal(GDN_STAGE_LOADS, 16);
  assert.equal(workgroupSize(src), GDN_COLUMN_THREADS);
  const it = warpIteration(gdnStageLoads(128, GDN_COLUMNS, GDN_COLUMN_THREADS, GDN_STAGE_LOADS), []);
  assert.deepEqual([it.loads, it.bytesPerLoad, it.sectorsPerLoad, it.dramBytes], [16, 128, 4, 2048]);
  // one staging iteration covers a dk = 128 block: 64 threads × 16 loads = 128 rows × 8 columns
  assert.equal(GDN_COLUMN_THREADS * GDN_STAGE_LOADS, 128 * GDN_COLUMNS);
});

test('GDN conv channel launch: loads mirror convChannelsShader (strided taps, coalesced rows), all in one iteration', () => {
  const src = convChannelsShader(4);
  assert.equal(CONV_CHANNEL_THREADS, 32);
  assert.match(src, /let ch = wid\.x \* 32u \+ t;/);
  assert.match(src, /for \(var j = 0u; j < 4u; j\+\+\) \{ w\[j\] = WC\[ch \* 4u \+ j\]; \}/);
  assert.match(src, /for \(var r = 0u; r < 3u; r\+\+\) \{ v\[r\] = WIN\[wo \+ r \* C \+ ch\]; \}/);
  assert.match(src, /v\[3\] = X\[xo \+ i \* C \+ ch\];/);
  const loads = convChannelLoads(4);
  assert.equal(loads.length, 8); // 4 tap weights + 3 window rows + the x row
  assert.deepEqual(loads.slice(0, 4).map((l) => loadFacts(l).sectors.size), [16, 16, 16, 16]); // 16-byte lane stride
  assert.deepEqual(loads.slice(4).map((l) => loadFacts(l).sectors.size), [4, 4, 4, 4]);
  const it = warpIteration(loads, []);
  assert.equal(it.dramBytes, 512 + 4 * 128); // the warp's weights once (L1 shares their sectors) + 4 rows
  const conv = (iteration: typeof it, unroll: number, threads: number): ModelledDispatch =>
    ({ key: 'c', bytes: 4 * 8192 * 14, workgroups: 8192 / threads, threadsPerWorkgroup: threads, workgroupBytes: 0, iteration, unroll });
  const coalesced = warpIteration([loads[4]!], []);
  assert.ok(estimate(conv(it, 1, 32), GPUS.h100).us < estimate(conv(coalesced, 4, 64), GPUS.h100).us, 'the channel launch beats 64 threads even at unroll 4');
});

// The GPU access model at M > 1 rows (kernels/webgpu/access-batch.ts, scripts/gpu-batch-model.mjs):
// at one row it must be the batch-1 model exactly; its bytes must scale as the kernels read
// (weights once per tile of rows, activations per row, KV and state per sequence); a step's
// time must not fall as rows are added; and its tokens per MTP round must be the mean of the
// bench's own accept draws (engine/speculative/accept-rate.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GPUS, estimate, floatWeightLoads, warpIteration, COALESCED_F32, type ModelledDispatch } from '../src/kernels/webgpu/access-model.js';
import {
  atBatch, batchBytes, chunkedStepTime, estimateAtBatch, expectedTokensPerRound, stepTime, tilesOf, weightBytesPerRow, type BatchParts, type BatchUse,
} from '../src/kernels/webgpu/access-batch.js';
import { denseMatmulTile } from '../src/kernels/webgpu/wgsl/matmul.js';
import { floatMatmulGroupShader, groupSegmentParams } from '../src/kernels/webgpu/wgsl/matmul-group.js';
import { COLUMN_ACCUMULATORS, FLOAT_COLUMNS, floatColumnsShader } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import { QUANT_COLUMNS, quantColumnsShader } from '../src/kernels/webgpu/wgsl/qmatmul-columns.js';
import { quantMatmulGroupShader } from '../src/kernels/webgpu/wgsl/qmatmul-group.js';
import { packParams } from '../src/kernels/webgpu/params.js';
import { ACTS_COLUMNS } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, TINY_THINK, sharedPath } from './paths.js';
import { positionDraw } from '../src/engine/speculative/accept-rate.js';

// qwen3.5-4b's linear-layer qkv+z matmul with the norm folded: 12,352 rows of K = 2,560 BF16
const ROWS = 12352;
const K = 2560;
const parts: BatchParts = { weightBytes: ROWS * K * 2, rowBytes: 4 * K + 4 * ROWS, seqBytes: 0, tokenStateBytes: 0, macsPerRow: ROWS * K, rowL1Sectors: COALESCED_F32.l1Sectors };
const extra = [COALESCED_F32, COALESCED_F32].map(() => Array.from({ length: 32 }, (_, l): readonly [number, number] => [4 * l, 4]));
const base = (tiles: number, unroll: number): ModelledDispatch => ({
  key: 'matmul_group_bf16_4_tm16_sg_norm', bytes: parts.weightBytes + parts.rowBytes, workgroups: ROWS * tiles, threadsPerWorkgroup: 64,
  workgroupBytes: 4096, iteration: warpIteration(floatWeightLoads('bf16', K), extra), unroll,
});
const use = (rows: number, limit: number): BatchUse => ({ rows, seqs: rows, tiles: tilesOf(rows, denseMatmulTile(rows, true, limit)) });

test('one row of one sequence is the batch-1 model: same bytes, same load pattern, same µs', () => {
  for (const gpu of [GPUS.h100, GPUS.h200]) {
    for (const unroll of [1, 4]) {
      const d = base(1, unroll);
      const one = { rows: 1, seqs: 1, tiles: 1 };
      assert.deepEqual(atBatch(d, parts, one), d);
      const e = estimateAtBatch(d, parts, one, gpu);
      assert.equal(e.us, estimate(d, gpu).us);
      assert.notEqual(e.bound, 'compute');
    }
  }
});

test('weight bytes per row fall as 1/M while the rows fit one tile, and step up with a second tile', () => {
  const roomy = 64 * 1024;
  for (let m = 1; m <= 64; m++) {
    const u = use(m, roomy);
    assert.equal(u.tiles, 1, `M ${m}: one tile of ≤ 64 rows fits ${roomy} bytes`);
    assert.equal(weightBytesPerRow(parts, u), parts.weightBytes / m);
  }
  // a 16 KiB workgroup memory holds a 32-row tile with the norm (32 × 256 + 256) but not 64
  const small = 16 * 1024;
  assert.equal(denseMatmulTile(40, true, small), 32);
  assert.equal(weightBytesPerRow(parts, use(33, small)), (2 * parts.weightBytes) / 33);
  assert.ok(weightBytesPerRow(parts, use(33, small)) > weightBytesPerRow(parts, use(32, small)));
  assert.equal(batchBytes(parts, use(33, small)), 2 * parts.weightBytes + 33 * parts.rowBytes);
});

test('a step\'s GPU time does not fall as rows are added (either unroll, either GPU, either tile limit)', () => {
  for (const gpu of [GPUS.h100, GPUS.h200]) {
    for (const limit of [16 * 1024, 64 * 1024]) {
      for (const unroll of [1, 4]) {
        let prev = 0;
        for (let m = 1; m <= 64; m++) {
          const u = use(m, limit);
          const us = estimateAtBatch(base(u.tiles, unroll), parts, u, gpu).us;
          assert.ok(us >= prev - 1e-9, `${gpu.name} limit ${limit} unroll ${unroll}: M ${m} ${us} µs < M ${m - 1} ${prev} µs`);
          prev = us;
        }
      }
    }
  }
});

test('each further row of a tile adds its activation loads to every iteration (L1), not DRAM weight bytes', () => {
  const d = base(1, 4);
  const at16 = atBatch(d, parts, { rows: 16, seqs: 16, tiles: 1 });
  assert.equal(at16.iteration.l1Sectors, d.iteration.l1Sectors + 15 * COALESCED_F32.l1Sectors);
  assert.equal(at16.iteration.dramBytes, d.iteration.dramBytes);
  assert.equal(at16.bytes, parts.weightBytes + 16 * parts.rowBytes);
  // 32 rows of one tile: far below 32 steps' time (weights once), above one step's
  const one = estimateAtBatch(d, parts, { rows: 1, seqs: 1, tiles: 1 }, GPUS.h200).us;
  const many = estimateAtBatch(d, parts, { rows: 32, seqs: 32, tiles: 1 }, GPUS.h200).us;
  assert.ok(many > one && many < 32 * one, `32 rows ${many} µs vs one ${one} µs`);
});

test('KV and recurrent state scale per sequence; a verify writes a state per token', () => {
  const state = 4 * 32 * 128 * 128;
  const gdn: BatchParts = { weightBytes: 0, rowBytes: 4 * 8192, seqBytes: state, tokenStateBytes: state, macsPerRow: 0, rowL1Sectors: 0 };
  // decode, 1 sequence: read + write the state (the batch-1 model's 2 × state)
  assert.equal(batchBytes(gdn, { rows: 1, seqs: 1, tiles: 1 }), 2 * state + 4 * 8192);
  // verify of 5 rows of one sequence: read once, 5 scratch states written
  assert.equal(batchBytes(gdn, { rows: 5, seqs: 1, tiles: 1 }), 6 * state + 5 * 4 * 8192);
  // 8 decode streams: 8 states read and written
  assert.equal(batchBytes(gdn, { rows: 8, seqs: 8, tiles: 1 }), 16 * state + 8 * 4 * 8192);
});

test('tokens per MTP round: 1 + P + … + P^k, the mean of accept-rate.ts\'s own draws', () => {
  assert.equal(expectedTokensPerRound(0, 4), 1);
  assert.equal(expectedTokensPerRound(1, 3), 4);
  assert.ok(Math.abs(expectedTokensPerRound(0.8, 4) - 3.3616) < 1e-12);
  assert.throws(() => expectedTokensPerRound(1.2, 2), /accept rate/);
  // rounds of k drafts over consecutive positions, each accepted where its draw < P, until
  // the first rejection; a round commits the accepted drafts plus the verify's own token
  const p = 0.8;
  for (const k of [1, 2, 4]) {
    let pos = 0;
    let tokens = 0;
    const rounds = 20000;
    for (let r = 0; r < rounds; r++) {
      let accepted = 0;
      while (accepted < k && positionDraw(7, 12345, pos + accepted) < p) accepted++;
      tokens += accepted + 1;
      pos += accepted + 1;
    }
    const mean = tokens / rounds;
    assert.ok(Math.abs(mean - expectedTokensPerRound(p, k)) < 0.05, `k ${k}: draws ${mean} vs ${expectedTokensPerRound(p, k)}`);
  }
});

test('host and GPU: the engine waits for a step before recording the next, so the times add', () => {
  assert.deepEqual(stepTime(4000, 220, 24), { hostUs: 5280, serialUs: 9280, overlappedUs: 5280 });
  assert.deepEqual(stepTime(9000, 100, 30), { hostUs: 3000, serialUs: 12000, overlappedUs: 9000 });
});

test('a multi-column float matmul (…_cols<C>) counts a row\'s x L1 loads once per C columns; weights and workgroups as the one-column dispatch', async () => {
  const { batchDispatch } = (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'gpu-batch-parts.mjs')).href)) as {
    batchDispatch(r: unknown, o: unknown): { d: ModelledDispatch; parts: BatchParts };
  };
  const [k, n, m] = [2560, 9216, 5];
  const words = packParams('matmul_group', { k, m, xOff: 0, segments: 1, ...groupSegmentParams([{ rows: n, outOff: 0, outStride: n, col0: 0 }]), eps: 0,
    zeroCentered: 0, gateOff: 0, expert: 0, experts: 0, tiles: 1, convOutOff: 0, convTable: 0 });
  const record = (key: string, wgsl: string, groups: number) => ({ key, wgsl, words, groups: [groups, 1, 1], layer: 0, label: 'matmul' });
  const opts = { context: 1024, vocabScale: 1, config: {}, seqs: 1, tokensPerSeq: m };
  const one = batchDispatch(record('matmul_group_bf16_1_tm16_vec4', floatMatmulGroupShader('bf16', 1, false, false, false, null, null, false, 16, 'vec4'), n), opts);
  const cols = batchDispatch(record(`matmul_group_bf16_1_tm16_vec4_cols${FLOAT_COLUMNS}`, floatColumnsShader('bf16', 1, false, false, 16, true), n / FLOAT_COLUMNS), opts);
  assert.equal(cols.parts.weightBytes, one.parts.weightBytes);
  assert.equal(cols.d.workgroups, one.d.workgroups);
  assert.ok(one.parts.rowL1Sectors > 0);
  assert.equal(cols.parts.rowL1Sectors, one.parts.rowL1Sectors / FLOAT_COLUMNS);
  // the first row's x too: the iteration keeps the weight sectors and 1/C of the x sectors
  const x = one.parts.rowL1Sectors;
  assert.equal(cols.d.iteration.l1Sectors, one.d.iteration.l1Sectors - x + x / FLOAT_COLUMNS);
  // never slower; faster where the rows' x loads made it L1-bound (32 rows)
  const us = (b: typeof one, rows: number): number => estimateAtBatch({ ...b.d, unroll: 1 }, b.parts, { rows, seqs: 1, tiles: 1 }, GPUS.h200).us;
  assert.ok(us(cols, m) <= us(one, m), `${m} rows: ${us(cols, m)} vs ${us(one, m)} µs`);
  assert.ok(us(cols, 32) < us(one, 32), `32 rows: ${us(cols, 32)} vs ${us(one, 32)} µs`);
});

test('a multi-column quantized matmul (qmatmul_group_…_cols<C>) loads a row\'s activations once per C columns: per weight byte, the activation L1 sectors ÷ C', async () => {
  const { batchDispatch } = (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'gpu-batch-parts.mjs')).href)) as {
    batchDispatch(r: unknown, o: unknown): { d: ModelledDispatch; parts: BatchParts };
  };
  const [k, n, m] = [2560, 9216, 5];
  const rowBytes = (k / 32) * 34;
  const words = (columns: number) => packParams('qmatmul_group', { k, m, rowBytes, segments: 1, ...groupSegmentParams([{ rows: n, outOff: 0, outStride: n, col0: 0 }], columns) });
  const record = (key: string, wgsl: string, groups: number, columns: number) => ({ key, wgsl, words: words(columns), groups: [groups, 1, 1], layer: 0, label: 'matmul' });
  const opts = { context: 1024, vocabScale: 1, config: {}, seqs: 1, tokensPerSeq: m };
  const one = batchDispatch(record('qmatmul_group_q8_0_1_tm16', quantMatmulGroupShader('q8_0', 1, true, false, 16), n, 1), opts);
  const cols = batchDispatch(record(`qmatmul_group_q8_0_1_tm8_cols${QUANT_COLUMNS}`, quantColumnsShader('q8_0', 1, true, false, 8), n / QUANT_COLUMNS, QUANT_COLUMNS), opts);
  assert.equal(cols.parts.weightBytes, one.parts.weightBytes);
  assert.equal(cols.parts.rowL1Sectors, one.parts.rowL1Sectors);
  assert.equal(cols.d.workgroups, one.d.workgroups / QUANT_COLUMNS, 'the recorded grid: a workgroup per C columns');
  // per DRAM byte: the weight sectors as before, each row's activation sectors ÷ C
  const act = one.parts.rowL1Sectors;
  const perByte = (b: typeof one, rows: number): number => (b.d.iteration.l1Sectors + (rows - 1) * act) / b.d.iteration.dramBytes;
  const weightSectors = one.d.iteration.l1Sectors - act;
  for (const rows of [1, 5, 32]) {
    assert.ok(Math.abs(perByte(cols, rows) - (weightSectors + (rows * act) / QUANT_COLUMNS) / one.d.iteration.dramBytes) < 1e-9, `${rows} rows`);
  }
  const us = (b: typeof one, rows: number): number => estimateAtBatch({ ...b.d, unroll: 1 }, b.parts, { rows, seqs: 1, tiles: 1 }, GPUS.h200).us;
  assert.ok(us(cols, m) < us(one, m), `${m} rows: ${us(cols, m)} vs ${us(one, m)} µs`);
});

test('the folded norm\'s weight is loaded once for C columns; the --float-plan what-if of the recorded columns and tile is the recorded model', async () => {
  const { batchDispatch, dispatchCost } = (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'gpu-batch-parts.mjs')).href)) as {
    batchDispatch(r: unknown, o: unknown): { d: ModelledDispatch; parts: BatchParts };
    dispatchCost(r: unknown, o: unknown, gpu: unknown): { us: number[]; bytes: number };
  };
  const [k, n, m, tile] = [2560, 9216, 32, COLUMN_ACCUMULATORS / FLOAT_COLUMNS];
  const words = packParams('matmul_group', { k, m, xOff: 0, segments: 1, ...groupSegmentParams([{ rows: n, outOff: 0, outStride: n, col0: 0 }]), eps: 0,
    zeroCentered: 1, gateOff: 0, expert: 0, experts: 0, tiles: m / tile, convOutOff: 0, convTable: 0 });
  const record = (key: string, wgsl: string, groups: number[]) => ({ key, wgsl, words, groups, layer: 0, label: 'matmul' });
  const opts = { context: 1024, vocabScale: 1, config: {}, seqs: m, tokensPerSeq: 1 };
  const one = batchDispatch(record('matmul_group_bf16_1_tm64_norm_vec4', floatMatmulGroupShader('bf16', 1, false, false, true, null, null, false, 64, 'vec4'), [n, 1, 1]), opts);
  const colsRec = record(`matmul_group_bf16_1_tm${tile}_norm_vec4_cols${FLOAT_COLUMNS}`, floatColumnsShader('bf16', 1, false, false, tile, true, FLOAT_COLUMNS, true), [n / FLOAT_COLUMNS, 1, m / tile]);
  const cols = batchDispatch(colsRec, opts);
  // x (32 sectors a row) and the norm weight (32) ÷ C; the weights' 16 sectors stay
  const [x, nw] = [one.parts.rowL1Sectors, 32];
  assert.equal(cols.d.iteration.l1Sectors, one.d.iteration.l1Sectors - (x + nw) * (1 - 1 / FLOAT_COLUMNS));
  assert.equal(cols.d.iteration.l1Sectors, 16 + (x + nw) / FLOAT_COLUMNS);
  // two tiles of 16 rows: the weights twice from DRAM, as a --float-plan C,16,dram what-if of the same record
  const recorded = dispatchCost(colsRec, opts, GPUS.h200);
  const planned = dispatchCost(colsRec, { ...opts, floatPlan: { columns: FLOAT_COLUMNS, tileRows: tile, secondTiles: 'dram' } }, GPUS.h200);
  assert.equal(recorded.bytes, 2 * cols.parts.weightBytes + m * cols.parts.rowBytes);
  assert.equal(planned.bytes, recorded.bytes);
  planned.us.forEach((u, i) => assert.ok(Math.abs(u - recorded.us[i]!) < 1e-9, `unroll ${i}: ${u} vs ${recorded.us[i]} µs`));
  // 'l2': the weights once from DRAM, every tile's L1 loads kept
  const l2 = dispatchCost(colsRec, { ...opts, floatPlan: { columns: FLOAT_COLUMNS, tileRows: tile, secondTiles: 'l2' } }, GPUS.h200);
  assert.equal(l2.bytes, cols.parts.weightBytes + m * cols.parts.rowBytes);
});

test('a step submitted in chunks: the first chunk\'s host time, then the GPU bound or the host bound', () => {
  // GPU-bound: 100 dispatches of 50 µs, 10 µs of host each, chunks of 32: the GPU starts after
  // the first chunk's 320 µs and never waits again
  const slowGpu = Array(100).fill(50);
  assert.deepEqual(chunkedStepTime(slowGpu, 10, 32), { chunks: 4, firstChunkHostUs: 320, chunkedUs: 320 + 5000 });
  // host-bound: 1 µs a dispatch on the GPU, 30 on the host: all the host time, then the last chunk's GPU time
  assert.equal(chunkedStepTime(Array(100).fill(1), 30, 32).chunkedUs, 100 * 30 + 4);
  // between serial (host + GPU) and overlapped (max), and ≈ first chunk + max(remaining host, GPU)
  for (const [gpu, h] of [[20, 24], [30, 24], [24, 24], [5, 36]] as const) {
    const seq = Array.from({ length: 220 }, (_, i) => (i === 219 ? 40 * gpu : gpu));
    const g = seq.reduce((a, b) => a + b, 0);
    const c = chunkedStepTime(seq, h, 32).chunkedUs;
    const t = stepTime(g, seq.length, h);
    assert.ok(c <= t.serialUs && c >= t.overlappedUs, `${gpu}/${h}: ${c} outside [${t.overlappedUs}, ${t.serialUs}]`);
    assert.ok(c >= 32 * h + Math.max(188 * h, g) - 1e-9, `${gpu}/${h}: ${c} below the first chunk + max(rest, GPU)`);
  }
  // one chunk of everything: the engine's serial step
  assert.equal(chunkedStepTime(slowGpu, 10, 1000).chunkedUs, stepTime(5000, 100, 10).serialUs);
  assert.throws(() => chunkedStepTime(slowGpu, 10, 0), /chunks of 0/);
});

const PER_ROW_RULES = ['attention inputs', 'GDN gated norm', 'embedding', 'rms norm', 'activation quantization', 'norm + activation quantization'];
type Rec = { key: string; label: string; wgsl: string; words: number[]; groups: number[]; layer: unknown };
type Cost = { us: number[]; bytes: number; rule: string; d: ModelledDispatch; parts: BatchParts; use: BatchUse };

test('every dispatch of the BF16, Q8_0 and Q4_K_M recordings (decode 1/8/32, verify 2..5, MTP head, lm_head) is modelled by a rule', async () => {
  const script = (name: string): string => pathToFileURL(join(REPO_ROOT, 'scripts', name)).href;
  const rec = (await import(script('gpu-batch-record.mjs'))) as {
    gpuLikeKernels(o: { foldQuantActs: boolean }): Promise<{ g: { foldQuantActs: boolean }; dispose(): void }>;
    recordScenarios(k: unknown, path: string): { config: unknown; scen: { decode: Record<string, Rec[]>; verify: Record<string, Rec[]>; mtp: Record<string, Rec[]>; head: Rec[] } };
  };
  const parts = (await import(script('gpu-batch-parts.mjs'))) as { dispatchCost(r: Rec, o: unknown, gpu: unknown): Cost; ruleOf(key: string): { name: string } | null };
  const families = (await import(script('gpu-access-families.mjs'))) as { modelDispatch(r: Rec, o: unknown): ModelledDispatch };
  const rules = new Set<string>();
  const keys = new Set<string>();
  const k = await rec.gpuLikeKernels({ foldQuantActs: true });
  try {
    for (const foldQuantActs of [true, false]) {
      k.g.foldQuantActs = foldQuantActs;
      for (const path of [TINY_THINK(), sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf'), sharedPath('models', 'gguf', 'tiny-think-Q4_K_M.gguf')]) {
        const { config, scen } = rec.recordScenarios(k, path);
        const passes: [string, Rec[], number, number][] = [['head', scen.head, 1, 1],
          ...Object.entries(scen.decode).map(([s, r]): [string, Rec[], number, number] => [`decode ${s}`, r, 1, Number(s)]),
          ...Object.entries(scen.verify).map(([t, r]): [string, Rec[], number, number] => [`verify ${t}`, r, Number(t), 1]),
          ...Object.entries(scen.mtp).map(([t, r]): [string, Rec[], number, number] => [`mtp ${t}`, r, Number(t), 1])];
        // the per-row families: S streams move S × one stream's bytes (same layer, key, order);
        // BF16's multi-column out_proj forms the gated norm at 8 streams (≤ COLUMNS_HEAD_NORM_ROWS
        // rows), not at 32: its other per-row families
      const compared = path === TINY_THINK() ? PER_ROW_RULES.filter((rule) => rule !== 'GDN gated norm') : PER_ROW_RULES;
      const perRowBytes = (records: Rec[], seqs: number): number[] => records.flatMap((r) => {
        const c = parts.dispatchCost(r, { context: 1024, vocabScale: 1, config, seqs, tokensPerSeq: 1 }, GPUS.h200);
        return compared.includes(c.rule) ? [c.bytes] : [];
      });
      // (8 and 32 streams: the same dispatches; not 1 stream: there the float out_proj forms the
      // gated norm itself (no gdn_gated_norm pass) and quantized matmuls quantize their own input,
      // as they do at 8 streams (≤ ACTS_FOLD_ROWS rows) with the fold on: then BF16 only)
      const folds = foldQuantActs && path !== TINY_THINK();
      const pairs: [number, number][] = folds ? [] : [[8, 32]];
      for (const [a, b] of pairs) {
        const few = perRowBytes(scen.decode[String(a)]!, a);
        const many = perRowBytes(scen.decode[String(b)]!, b);
        assert.ok(few.length > 0 && many.length === few.length, `${path}: per-row dispatches at ${a} and ${b} streams`);
        many.forEach((m, i) => assert.ok(Math.abs(m - (b / a) * few[i]!) <= 1e-9 * m, `${path} per-row dispatch ${i}: ${m} bytes at ${b} streams vs ${few[i]} at ${a}`));
      }
      for (const [pass, records, tokensPerSeq, seqs] of passes) {
          assert.ok(records.length > 0, `${path} ${pass}: no dispatches recorded`);
          for (const r of records) {
            const opts = { context: 1024, vocabScale: 1, config, seqs, tokensPerSeq };
            for (const gpu of [GPUS.h100, GPUS.h200]) {
              const c = parts.dispatchCost(r, opts, gpu);
              assert.ok(c.us.length === 2 && c.us.every((u) => Number.isFinite(u) && u > gpu.gapUs), `${path} ${pass} ${r.key}: ${c.us} µs`);
              rules.add(c.rule);
              keys.add(r.key.replace(/_tm\d+.*$/, ''));
            }
            // one row of one sequence: the parts add up to the batch-1 model's bytes
            if (pass === 'decode 1' || pass === 'head') {
              const c = parts.dispatchCost(r, opts, GPUS.h200);
              const one = families.modelDispatch(r, opts);
              assert.ok(Math.abs(batchBytes(c.parts, c.use) - one.bytes) <= 1e-9 * one.bytes, `${path} ${pass} ${r.key}: parts ${batchBytes(c.parts, c.use)} vs ${one.bytes} bytes`);
            }
          }
        }
      }
    }
  } finally { k.dispose(); }
  // the quantized families the brief named are among them, each under its own rule
  for (const key of ['norm_quant_acts', 'quant_acts', 'quant_acts_silu', `qmatmul_acts_q8_0_c${ACTS_COLUMNS}v`, 'qmatmul_group_q8_0_2', 'qmatmul_q8_0', 'qmatmul_group_q4_k_2', 'matmul_group_bf16_2']) {
    assert.ok(keys.has(key), `no ${key} dispatch recorded (${[...keys].join(' ')})`);
  }
  assert.ok(rules.size >= 10, [...rules].join(', '));
  // a dispatch no rule covers, or one whose parts are not numbers, is an error, never a NaN
  const anyRecord = { key: 'unheard_of_kernel', label: 'x', wgsl: '@workgroup_size(64)', words: [], groups: [1, 1, 1], layer: 0 };
  assert.equal(parts.ruleOf(anyRecord.key), null);
  assert.throws(() => parts.dispatchCost(anyRecord, { context: 1024, vocabScale: 1, config: {}, seqs: 1, tokensPerSeq: 1 }, GPUS.h200), /no rule for dispatch "unheard_of_kernel"/);
  const noRows = { ...anyRecord, key: 'qmatmul_group_q8_0_2_tm16', wgsl: 'const P_k = 0u;\nconst P_m = 1u;\nconst P_rowBytes = 2u;\nconst P_segments = 3u;\n@workgroup_size(64)', words: [64, 1, 68, 1], label: 'matmul_q8_0' };
  assert.throws(() => parts.dispatchCost(noRows, { context: 1024, vocabScale: 1, config: {}, seqs: 1, tokensPerSeq: 1 }, GPUS.h200), /not modelled/);
});

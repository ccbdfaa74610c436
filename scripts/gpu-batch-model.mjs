// The GPU memory-access model (scripts/gpu-access-model.mjs) at M > 1 rows a step: predicts
// for an H100/H200 the verify step of MTP k = 1..4 ÷ a decode step, 8 and 32 streams'
// throughput ÷ one stream's, and an MTP round's end-to-end speedup at accept rate P — each
// with the GPU's time (src/kernels/webgpu/access-batch.ts) and the host's (dispatches ×
// Dawn's µs per dispatch). Dispatches are recorded on this machine's adapter without running
// (scripts/gpu-batch-record.mjs) on a --layers cut and scaled as gpu-access-model.mjs does.
// A model, not a measurement: docs/kernels.md "Batch M > 1" lists the assumptions.
//   node scripts/gpu-batch-model.mjs [--shapes qwen3.5-4b,qwen3.5-0.8b] [--formats bf16]
//        [--gpu h100,h200] [--context 1024] [--accept 0.8] [--host-us 24,33.5,36] [--acts-columns C] [--conv-fold on|off]
//        [--work DIR] [--records FILE] [--from FILE] [--out FILE.json]
import { parseArgs } from 'node:util';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SHAPES } from '../dist/src/tools/model-shapes.js';
import { GPUS, estimate } from '../dist/src/kernels/webgpu/access-model.js';
import { chunkedStepTime, expectedTokensPerRound, stepTime } from '../dist/src/kernels/webgpu/access-batch.js';
import { draftVocabFor } from '../dist/src/engine/engine-options.js';
import { modelDispatch, stepSummary } from './gpu-access-families.mjs';
import { dispatchCost } from './gpu-batch-parts.mjs';

const { values } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'qwen3.5-4b,qwen3.5-0.8b' },
    formats: { type: 'string', default: 'bf16' },
    gpu: { type: 'string', default: 'h100,h200' },
    context: { type: 'string', default: '1024' },
    layers: { type: 'string', default: '4' },
    accept: { type: 'string', default: '0.8' },
    'host-us': { type: 'string', default: '24,33.5,36' },
    // dispatches a submitted chunk (the encoder submits chunk i while it records chunk i + 1)
    chunk: { type: 'string', default: '32' },
    'target-tbs': { type: 'string', default: '4.3' },
    // ids an MTP draft lm_head reads (the engine's --draft-vocab; default: its default), capped at the vocabulary
    'draft-vocab': { type: 'string' },
    // on: a quantized matmul of M ≤ 4 rows quantizes its own input (a GPU adapter's choice); off: quant_acts + the tiled qmatmul
    'fold-quant-acts': { type: 'string', default: 'on' },
    // on: the GDN causal conv folds into the in_proj matmul at decode (a GPU adapter's choice); off: its own dispatch
    'conv-fold': { type: 'string', default: 'on' },
    // output columns an activation-quantizing workgroup computes (default: a GPU adapter's, ACTS_COLUMNS)
    'acts-columns': { type: 'string' },
    // a what-if for the multi-column float matmuls: C columns, tiles of T rows, later tiles' weights from l2 or dram
    'float-plan': { type: 'string' },
    work: { type: 'string', default: '/tmp/gpu-batch-model' },
    // quantize-gguf reads the checkpoint's tokenizer: one is copied in from here when absent
    tokenizer: { type: 'string', default: '../shared/models/tiny-think' },
    out: { type: 'string' }, records: { type: 'string' }, from: { type: 'string' },
  },
});
const gpus = values.gpu.split(',').map((g) => {
  if (!Object.hasOwn(GPUS, g)) throw new Error(`--gpu: "${g}" is not one of ${Object.keys(GPUS).join(', ')}`);
  return GPUS[g];
});
const context = Number(values.context);
const accept = Number(values.accept);
const hostUs = values['host-us'].split(',').map(Number);
const chunk = Number(values.chunk);
const targetTbs = Number(values['target-tbs']);
const draftVocab = values['draft-vocab'] === undefined ? draftVocabFor({}) : Number(values['draft-vocab']);
if (!(Number.isInteger(draftVocab) && draftVocab >= 1)) throw new Error(`--draft-vocab: "${values['draft-vocab']}" is not a positive integer`);
const floatPlan = values['float-plan'] ? (([c, t, from]) => {
  if (!(Number(c) >= 2 && Number(t) >= 1 && ['l2', 'dram'].includes(from))) throw new Error(`--float-plan: "${values['float-plan']}" is not C,T,l2|dram`);
  return { columns: Number(c), tileRows: Number(t), secondTiles: from };
})(values['float-plan'].split(',')) : null;
const REC_VOCAB = 4096;
const STREAMS = [1, 8, 32];
const KS = [1, 2, 3, 4];

async function record() {
  const { gpuLikeKernels, recordScenarios } = await import('./gpu-batch-record.mjs');
  if (!['on', 'off'].includes(values['fold-quant-acts'])) throw new Error(`--fold-quant-acts: "${values['fold-quant-acts']}" is not on or off`);
  if (!['on', 'off'].includes(values['conv-fold'])) throw new Error(`--conv-fold: "${values['conv-fold']}" is not on or off`);
  const k = await gpuLikeKernels({ foldQuantActs: values['fold-quant-acts'] === 'on', convFold: values['conv-fold'] === 'on', ...(values['acts-columns'] ? { actsColumns: Number(values['acts-columns']) } : {}) });
  const out = [];
  for (const shape of values.shapes.split(',')) {
    for (const format of values.formats.split(',')) {
      const rec = recordScenarios(k, await checkpoint(shape, format), { streams: STREAMS, ks: KS });
      out.push({ shape, format, ...rec, adapter: k.g.adapter.description || k.g.adapter.device });
    }
  }
  k.dispose();
  return out;
}

async function checkpoint(shape, format) {
  const dir = join(resolve(values.work), shape);
  const st = join(dir, 'st');
  const { makeModel } = await import('../dist/src/tools/make-model.js');
  if (!existsSync(join(st, 'config.json'))) {
    mkdirSync(dir, { recursive: true });
    await makeModel({ shape, dtype: 'bf16', seed: 1, out: st, layers: Number(values.layers), vocabSize: REC_VOCAB, layout: 'flat' });
  }
  if (format === 'bf16') return st;
  const gguf = join(dir, `${format}.gguf`);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) if (!existsSync(join(st, f))) copyFileSync(join(resolve(values.tokenizer), f), join(st, f));
  const { quantizeToGguf } = await import('../dist/src/tools/quantize-gguf.js');
  if (!existsSync(gguf)) await quantizeToGguf({ model: st, out: gguf, type: format });
  return gguf;
}

/** A recorded pass's GPU µs (lo, hi unroll), bytes and dispatches, scaled to the real shape;
 * `seq`: each real dispatch's GPU µs (lo) in the step's order (the cut's decoder layers
 * repeated as the real shape's, for the chunked host estimate). */
function passCost(rec, { kinds, config, shape, seqs, tokensPerSeq, gpu, headVocab = SHAPES[shape].vocab }) {
  const spec = SHAPES[shape];
  const realFull = Math.floor(spec.layers / spec.fullAttentionInterval);
  const real = { linear: spec.layers - realFull, full: realFull };
  const cut = { linear: kinds.filter((x) => x === 'linear').length, full: kinds.filter((x) => x === 'full').length };
  const us = [0, 0];
  const bound = {};
  const byKey = {};
  let bytes = 0;
  let dispatches = 0;
  const costs = [];
  for (const r of rec) {
    const kind = typeof r.layer === 'number' ? kinds[r.layer] : null;
    const times = kind ? real[kind] / cut[kind] : 1;
    const vocabScale = r.layer === 'head' && r.label.startsWith('matmul') ? headVocab / REC_VOCAB : 1;
    const c = dispatchCost(r, { context, vocabScale, config, seqs, tokensPerSeq, floatPlan }, gpu);
    c.us.forEach((u, i) => { us[i] += times * u; });
    bound[c.bound] = (bound[c.bound] ?? 0) + times * c.us[0];
    const key = r.key.replace(/_tm\d+.*$/, '');
    byKey[key] = (byKey[key] ?? 0) + times * c.us[0];
    bytes += times * c.bytes;
    dispatches += times;
    costs.push({ layered: kind !== null, times, us: c.us[0] });
  }
  const top = Object.entries(byKey).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${(v / us[0]).toFixed(2)}`);
  return { us, bytes, dispatches, bound, top, seq: stepOrder(costs) };
}

/** The real step's dispatch order: the cut's decoder-layer dispatches repeated as a block
 * (the real layers are the cut's kinds repeated: qwen3.5 shapes, R = real ÷ cut layers of
 * each kind), between what comes before and after them; a kind scaled unevenly repeats each
 * dispatch in place. */
function stepOrder(costs) {
  const layered = costs.filter((c) => c.layered);
  const reps = new Set(layered.map((c) => c.times));
  const first = costs.findIndex((c) => c.layered);
  const last = costs.length - 1 - [...costs].reverse().findIndex((c) => c.layered);
  if (first < 0) return costs.map((c) => c.us);
  const r = [...reps][0];
  const inPlace = (list) => list.flatMap((c) => Array(Math.round(c.times)).fill(c.us));
  if (reps.size !== 1 || !Number.isInteger(r)) return inPlace(costs);
  const block = costs.slice(first, last + 1);
  return [...inPlace(costs.slice(0, first)), ...Array.from({ length: r }, () => block.map((c) => (c.layered ? c.us : c.us / r))).flat(),
    ...inPlace(costs.slice(last + 1))];
}

/** The existing batch-1 model's GPU µs of the same decode recording (the check that the
 * batch model reproduces it at one row). */
function batch1Reference(rec, { kinds, config, shape, gpu }) {
  const spec = SHAPES[shape];
  const realFull = Math.floor(spec.layers / spec.fullAttentionInterval);
  const real = { linear: spec.layers - realFull, full: realFull };
  const cut = { linear: kinds.filter((x) => x === 'linear').length, full: kinds.filter((x) => x === 'full').length };
  const rows = rec.map((r) => {
    const kind = typeof r.layer === 'number' ? kinds[r.layer] : null;
    const vocabScale = r.layer === 'head' && r.label.startsWith('matmul') ? spec.vocab / REC_VOCAB : 1;
    return { key: r.key, label: r.label, where: kind ?? r.layer ?? 'embed', times: kind ? real[kind] / cut[kind] : 1, d: modelDispatch(r, { context, vocabScale, config }) };
  });
  return stepSummary(rows, gpu, estimate).gpu_us;
}

const r1 = (v) => +v.toFixed(1);
const r3 = (v) => +v.toFixed(3);
/** Serial (the engine today: host then GPU), chunked (submitted in chunks of --chunk
 * dispatches while recording: access-batch.ts chunkedStepTime) and overlapped (max) step µs
 * at each host cost; GPU µs at lo unroll. */
const withHost = (pass) => Object.fromEntries(hostUs.map((h) => {
  const t = stepTime(pass.us[0], pass.dispatches, h);
  const c = chunkedStepTime(pass.seq, h, chunk);
  return [`${h}us`, { host_us: r1(t.hostUs), serial_us: r1(t.serialUs), chunked_us: r1(c.chunkedUs), overlapped_us: r1(t.overlappedUs),
    first_chunk_host_us: r1(c.firstChunkHostUs), chunks: c.chunks }];
}));
/** A pass's step µs with the host at `h` µs a dispatch: serial, or chunked (lo unroll). */
const serialUs = (pass, h, i) => pass.us[i] + pass.dispatches * h;
const chunkedUs = (pass, h) => chunkedStepTime(pass.seq, h, chunk).chunkedUs;
/** Overlapped (the engine's greedy decode since engine/overlap.ts): max(host, GPU), lo unroll. */
const overlappedUs = (pass, h) => stepTime(pass.us[0], pass.dispatches, h).overlappedUs;

function model(recording, gpu) {
  const { shape, format, kinds, config, scen } = recording;
  const at = (rec, tokensPerSeq, seqs = 1, headVocab = SHAPES[shape].vocab) => passCost(rec, { kinds, config, shape, seqs, tokensPerSeq, gpu, headVocab });
  const decode = Object.fromEntries(STREAMS.map((s) => [s, at(scen.decode[s], 1, s)]));
  const one = decode[1];
  const ref = batch1Reference(scen.decode[1], { kinds, config, shape, gpu });
  if (Math.abs(ref[0] - one.us[0]) > 0.06) throw new Error(`batch model at M = 1 (${one.us[0]} µs) is not the batch-1 model's (${ref[0]} µs)`);
  // lo – hi GPU-only, serial with the host (lo – hi), chunked with the host (lo)
  const ratio = (fn) => ({ gpu: one.us.map((_, i) => r3(fn((c) => c.us[i]))),
    ...Object.fromEntries(hostUs.map((h) => [`serial_${h}us`, one.us.map((_, i) => r3(fn((c) => serialUs(c, h, i))))])),
    ...Object.fromEntries(hostUs.map((h) => [`chunked_${h}us`, r3(fn((c) => chunkedUs(c, h)))])) });
  const streams = Object.fromEntries(STREAMS.filter((s) => s > 1).map((s) => [s, {
    dispatches: r1(decode[s].dispatches), gb: r3(decode[s].bytes / 1e9), gpu_us: decode[s].us.map(r1), bound_share: shares(decode[s].bound), top_lo: decode[s].top,
    throughput_vs_one: ratio((t) => (s * t(one)) / t(decode[s])), step: withHost(decode[s]),
  }]));
  const verify = Object.fromEntries(KS.map((kk) => {
    const v = at(scen.verify[kk + 1], kk + 1);
    return [kk, { rows: kk + 1, dispatches: r1(v.dispatches), gb: r3(v.bytes / 1e9), gpu_us: v.us.map(r1), bound_share: shares(v.bound), top_lo: v.top, verify_vs_decode: ratio((t) => t(v) / t(one)) }];
  }));
  // a draft's lm_head reads the first --draft-vocab rows only (the engine's draft head)
  const head = at(scen.head, 1, 1, Math.min(draftVocab, SHAPES[shape].vocab));
  const mtp = Object.fromEntries(Object.entries(scen.mtp).map(([rows, rec]) => [rows, at(rec, Number(rows))]));
  const rounds = Object.fromEntries(KS.map((kk) => {
    const e = expectedTokensPerRound(accept, kk);
    const v = at(scen.verify[kk + 1], kk + 1);
    // extend over the E committed rows (interpolated), then per draft: lm_head + argmax,
    // and k − 1 single-row MTP steps; argmax: one small dispatch (a gap) a draft
    const lo = Math.floor(e);
    const f = e - lo;
    const ext = (pick) => (1 - f) * pick(mtp[lo]) + f * pick(mtp[Math.min(lo + 1, KS.length + 1)]);
    const cost = (pick) => pick(v) + ext(pick) + kk * (pick(head)) + (kk - 1) * pick(mtp[1]);
    const dispatches = cost((c) => c.dispatches) + kk;
    const gpuUs = one.us.map((_, i) => cost((c) => c.us[i]) + kk * gpu.gapUs);
    // chunked: each pass (verify, extend, a draft's lm_head + argmax, an MTP step) submitted in
    // chunks as it is recorded, the passes one after another (each waits on the last's result)
    const draft = { seq: [...head.seq, gpu.gapUs] };
    const chunkedRound = (h) => chunkedUs(v, h) + ext((c) => chunkedUs(c, h)) + kk * chunkedUs(draft, h) + (kk - 1) * chunkedUs(mtp[1], h);
    const extRows = mtp[Math.min(Math.round(e), KS.length + 1)];
    // the engine's greedy round (engine/speculative/pending-drafts.ts): extend, drafts and the
    // next verify recorded as one pass, one read-back; the verify embeds its drafts from the
    // device (forward.ts embedMixed: two more small dispatches, a gap each)
    const oneReadBackSeq = [...extRows.seq, ...Array.from({ length: kk }, () => draft.seq).flat(), ...Array.from({ length: kk - 1 }, () => mtp[1].seq).flat(),
      gpu.gapUs, gpu.gapUs, ...v.seq];
    // a sampled round deferred the same way (a seeded one verified by matching, an unseeded one
    // by rejection sampling: deferred-rejection.ts): each draft step runs topCandidates and
    // candidateDraws where a greedy one runs argmax (one more small dispatch, a gap; a round of
    // sampled chains alone skips the argmax); its verify selects candidates where the greedy
    // one takes argmax (one dispatch either way). MTP off's sampled decode, overlapped, runs
    // topCandidates + candidateDraws where greedy decode runs argmax: one more a step
    const sampledSeq = [...oneReadBackSeq, ...Array.from({ length: kk }, () => gpu.gapUs)];
    const sampledOne = { us: [one.us[0] + gpu.gapUs], dispatches: one.dispatches + 1 };
    return [kk, { tokens_per_round: r3(e), dispatches: r1(dispatches), gpu_us: gpuUs.map(r1),
      speedup: { gpu: gpuUs.map((g, i) => r3((e * one.us[i]) / g)), ...Object.fromEntries(hostUs.map((h) => [`serial_${h}us`, gpuUs.map((g, i) => r3((e * (one.us[i] + one.dispatches * h)) / (g + dispatches * h)))])),
        ...Object.fromEntries(hostUs.map((h) => [`chunked_${h}us`, r3((e * chunkedUs(one, h)) / chunkedRound(h))])),
        // vs MTP off as the engine runs it: greedy decode overlapped (engine/overlap.ts); the greedy
        // round of one read-back (pending-drafts.ts): extend, drafts and verify one chunked pass
        ...Object.fromEntries(hostUs.map((h) => [`vs_overlapped_decode_${h}us`, r3((e * overlappedUs(one, h)) / chunkedUs({ seq: oneReadBackSeq }, h))])),
        ...Object.fromEntries(hostUs.map((h) => [`sampled_vs_overlapped_sampled_decode_${h}us`, r3((e * overlappedUs(sampledOne, h)) / chunkedUs({ seq: sampledSeq }, h))])),
        // the round of two read-backs (drafts, then verify: --overlap off, or a round with a
        // sampled, penalised or constrained chain), each pass chunked
        ...Object.fromEntries(hostUs.map((h) => [`two_read_backs_vs_overlapped_decode_${h}us`, r3((e * overlappedUs(one, h)) / chunkedRound(h))])) } }];
  }));
  return { shape, format, gpu: gpu.name, decode_1: { dispatches: r1(one.dispatches), top_lo: one.top, gb: r3(one.bytes / 1e9), gpu_us: one.us.map(r1), batch1_model_gpu_us: ref, fraction_of_peak: one.us.map((u) => r3((1e6 * one.bytes) / gpu.peakBytesPerS / u)), step: withHost(one),
      // issue #47's decode target: ≥ 0.5 of --target-tbs (H200: 4.3 TB/s) with the host's time
      fraction_of_target: { target_tbs: targetTbs, gpu_only: one.us.map((u) => r3((1e6 * one.bytes) / (targetTbs * 1e12) / u)),
        ...Object.fromEntries(hostUs.map((h) => [`${h}us`, { serial: r3((1e6 * one.bytes) / (targetTbs * 1e12) / serialUs(one, h, 0)), chunked: r3((1e6 * one.bytes) / (targetTbs * 1e12) / chunkedUs(one, h)),
          overlapped: r3((1e6 * one.bytes) / (targetTbs * 1e12) / overlappedUs(one, h)) }])) } },
    streams, verify, mtp_round: { accept_rate: accept, by_k: rounds } };
}

function shares(bound) {
  const total = Object.values(bound).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(bound).map(([k, v]) => [k, r3(v / total)]));
}

const recordings = values.from ? JSON.parse(readFileSync(values.from, 'utf8')) : await record();
if (values.records) writeFileSync(values.records, JSON.stringify(recordings));
const results = recordings.flatMap((rec) => gpus.map((g) => model(rec, g)));
const out = {
  context, accept_rate: accept, draft_vocab: draftVocab, host_us_per_dispatch: hostUs, adapter_recorded_on: recordings[0]?.adapter ?? null,
  assumptions: [
    'the batch-1 model (gpu-access-model.mjs) per dispatch; at M = 1 its GPU µs are reproduced exactly (checked)',
    'weights read from DRAM once per tile of rows (grid z of a dense matmul: ceil(M / tile), tile as matmulTile picked it on the recording adapter); each further row of a tile adds its activation loads to every main-loop iteration (L1)',
    'attention: K and V of --context positions read once per sequence (decode: a sequence per grid row; verify: one query block); GDN and conv: one dispatch per sequence, its state read once and a state written per token (verify: per-step scratch states)',
    'compute bound: the shaders\' f32 multiply-adds (2 FLOP each, no tensor cores from WGSL) at 67 TFLOPS FP32 on the SMs the dispatch keeps busy; the GDN serial chain per token is not modelled',
    'host: dispatches x host µs per dispatch (24 and 36: issue #47\'s Dawn figures; 33.5: Dawn encode 6.5 + queue.submit 27 measured on lavapipe, docs/kernels.md); the engine\'s plain loop records, submits and waits for the read-back before recording the next step, so serial = host + GPU; overlapped = max is the bound with encoding ahead, and the engine\'s greedy MTP-off decode since overlapped decode (engine/overlap.ts)',
    'MTP round (greedy, drafts chained on the kernels): verify of k + 1 rows, the MTP extend over the E committed rows (E = 1 + P + ... + P^k, interpolated between recorded row counts), k draft lm_heads (the first --draft-vocab rows: the engine\'s draft head) + k argmax dispatches (a gap each), k - 1 single-row MTP steps; vs MTP off: one decode step a token. chunked_*: two read-backs a round (drafts, then verify); vs_overlapped_decode_*: the engine\'s greedy round since pending-drafts.ts, extend + drafts + verify (+ 2 small embed dispatches) one chunked pass, one read-back, against overlapped decode',
  ],
  results,
};
const text = JSON.stringify(out, null, 1);
if (values.out) writeFileSync(values.out, text + '\n');
console.log(text);
process.exit(0);

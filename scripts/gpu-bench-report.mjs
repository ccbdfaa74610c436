// scripts/gpu-bench.sh's arithmetic, free of I/O (test/gpu-bench-report.test.ts): which GPU
// ran and its memory bandwidth (a table of known GPUs, the figure used written into the
// JSON), whether the WebGPU adapter is that GPU or a CPU emulation, and the issue-47 ratios
// computed from the steps' JSON against the detected GPU's bandwidth.

/** Known GPUs, first match wins: `nvidia-smi`'s name (or the adapter's description) against
 * `match`. `tb_s`: the vendor's datasheet memory bandwidth (TB/s = 1e12 B/s); `copy_tb_s`:
 * a device-to-device copy measured on such a machine here (bytes read + written; KINDS.md of
 * the device tool), when one was. Order matters: the PCIe / NVL variants before the plain names. */
export const KNOWN_GPUS = [
  { match: /H200 NVL/i, name: 'NVIDIA H200 NVL (HBM3e)', tb_s: 4.8, copy_tb_s: null, source: 'NVIDIA H200 datasheet: 4.8 TB/s' },
  { match: /H200/i, name: 'NVIDIA H200 SXM (141 GB HBM3e)', tb_s: 4.8, copy_tb_s: 4.3,
    source: 'NVIDIA H200 datasheet: 4.8 TB/s (issue 47 states 4.3 TB/s: the device-to-device copy measured here)' },
  { match: /H100.*PCIe/i, name: 'NVIDIA H100 PCIe (80 GB HBM2e)', tb_s: 2.0, copy_tb_s: null, source: 'NVIDIA H100 datasheet: 2.0 TB/s (PCIe)' },
  { match: /H100 NVL/i, name: 'NVIDIA H100 NVL (94 GB HBM3)', tb_s: 3.9, copy_tb_s: null, source: 'NVIDIA H100 datasheet: 3.9 TB/s (NVL)' },
  { match: /H100/i, name: 'NVIDIA H100 SXM5 (80 GB HBM3)', tb_s: 3.35, copy_tb_s: 3.0, source: 'NVIDIA H100 datasheet: 3.35 TB/s (SXM5)' },
  { match: /GH200/i, name: 'NVIDIA GH200 (96 GB HBM3)', tb_s: 4.0, copy_tb_s: null, source: 'NVIDIA GH200 datasheet: 4 TB/s' },
  { match: /A100.*80GB/i, name: 'NVIDIA A100 80 GB', tb_s: 2.039, copy_tb_s: null, source: 'NVIDIA A100 datasheet: 2,039 GB/s (SXM 80 GB)' },
  { match: /A100/i, name: 'NVIDIA A100 40 GB', tb_s: 1.555, copy_tb_s: null, source: 'NVIDIA A100 datasheet: 1,555 GB/s (40 GB)' },
  { match: /L40S/i, name: 'NVIDIA L40S', tb_s: 0.864, copy_tb_s: null, source: 'NVIDIA L40S datasheet: 864 GB/s' },
];

/**
 * The bandwidth the ratios use. `gpuName`: nvidia-smi's name (null without nvidia-smi);
 * `adapterText`: the adapter's vendor/architecture/description; `override`: a TB/s figure
 * from GPU_BENCH_BANDWIDTH_TBS (wins when set). Null tb_s (with the reason) when unknown.
 */
export function gpuBandwidth(gpuName, adapterText, override) {
  if (override !== undefined && override !== null && override !== '') {
    const v = Number(override);
    if (!(v > 0)) throw new Error(`GPU_BENCH_BANDWIDTH_TBS must be a positive number of TB/s (got "${override}")`);
    return { tb_s: v, copy_tb_s: null, matched: null, source: `GPU_BENCH_BANDWIDTH_TBS=${override}` };
  }
  for (const text of [gpuName, adapterText]) {
    if (!text) continue;
    const g = KNOWN_GPUS.find((k) => k.match.test(text));
    if (g) return { tb_s: g.tb_s, copy_tb_s: g.copy_tb_s, matched: g.name, source: `${g.source}; matched "${text}"` };
  }
  return { tb_s: null, copy_tb_s: null, matched: null,
    source: `unknown GPU (${gpuName ?? 'no nvidia-smi'}; adapter ${adapterText || 'none'}): add it to KNOWN_GPUS in scripts/gpu-bench-report.mjs or set GPU_BENCH_BANDWIDTH_TBS` };
}

/**
 * Whether the benches can mean anything. `adapter`: the probe's summary (null: none found);
 * `gpu`: nvidia-smi's answer (null: none); `mode`: full or dry. A CPU emulation on a full
 * run is the useless case (Dawn found lavapipe/llvmpipe, not the GPU): webgpu steps are
 * skipped there, since a real shape would run for hours on it.
 */
export function verdict(adapter, gpu, mode) {
  if (!adapter) return { ok: false, runWebgpu: false, line: 'NO WEBGPU ADAPTER: Dawn found no Vulkan device (see diagnostics.probe_error; loader, ICD)' };
  const name = adapter.description || adapter.device || adapter.vendor || '?';
  if (adapter.cpuEmulation) {
    if (mode === 'dry') return { ok: true, runWebgpu: true, line: `adapter "${name}" is a CPU emulation (expected in a dry run)` };
    return { ok: false, runWebgpu: false,
      line: `USELESS RUN: the WebGPU adapter is "${name}", a CPU emulation (llvmpipe/lavapipe), not ${gpu ? `the GPU (${gpu.name})` : 'a GPU'}: ` +
        'the NVIDIA Vulkan ICD was not used (diagnostics.icd_in_use, icds_found, icd_library_found); webgpu steps skipped' };
  }
  return { ok: true, runWebgpu: true, line: `adapter "${name}" (${adapter.vendor || '?'} ${adapter.architecture || '?'}) is a real GPU` };
}

const fig = (run, ...path) => {
  let v = run;
  for (const k of path) v = v && typeof v === 'object' ? v[k] : undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
};
const ok = (run) => run && typeof run === 'object' && !run.error && !run.skipped;
const ratio = (a, b) => (a !== null && b !== null && b !== 0 ? a / b : null);
const target = (value, goal, cmp) => ({ value, target: goal, met: value === null ? null : cmp === '>=' ? value >= goal : value <= goal });

/** Per-shape figures from the runs (keys `SHAPE.STEP`), against `bandwidth` ({tb_s, copy_tb_s}). */
export function shapeSummary(runs, shape, bandwidth) {
  const r = (step) => (ok(runs[`${shape}.${step}`]) ? runs[`${shape}.${step}`] : null);
  const decode = r('decode-bf16');
  const decodeMs = fig(decode, 'ms_per_step', 'median');
  const decodeTokS = fig(decode, 'tok_s', 'median');
  const achievedGbs = fig(decode, 'achieved_gbs');
  const streams = (n) => fig(r(`streams-${n}-bf16`), 'tok_s', 'median');
  const mtp = r('mtp-0.8-bf16');
  const mtpRun = Array.isArray(mtp?.runs) ? mtp.runs.find((x) => x.accept === 0.8) ?? null : null;
  const sampled = r('mtp-0.8-sampled-bf16');
  const sampledRun = Array.isArray(sampled?.runs) ? sampled.runs.find((x) => x.accept === 0.8) ?? null : null;
  const qwen = r('mtp-0.8-qwen-sampled-bf16');
  const qwenRun = Array.isArray(qwen?.runs) ? qwen.runs.find((x) => x.accept === 0.8) ?? null : null;
  const floor = r('pytorch-floor-bf16');
  const floorTokS = fig(floor, 'decode_tok_s');
  const copy = fig(runs['copy-bandwidth'], 'copy_tb_s');
  const quant = (t) => fig(r(`decode-${t}`), 'tok_s', 'median');
  return {
    decode_tok_s: { bf16: decodeTokS, q8_0: quant('q8_0'), q4_k_m: quant('q4_k_m') },
    decode_achieved_gbs: achievedGbs,
    decode_fraction_of_bandwidth: bandwidth.tb_s ? ratio(achievedGbs, bandwidth.tb_s * 1000) : null,
    decode_fraction_of_measured_copy: copy ? ratio(achievedGbs, copy * 1000) : null,
    verify4_over_decode: ratio(fig(r('verify-4-bf16'), 'ms_per_step', 'median'), decodeMs),
    streams8_over_1: ratio(streams(8), decodeTokS),
    streams32_over_1: ratio(streams(32), decodeTokS),
    prefill_2048_tok_s: fig(r('prefill-2048-bf16'), 'tok_s', 'median'),
    mtp_0_8_speedup: mtpRun && typeof mtpRun.speedup === 'number' ? mtpRun.speedup : null,
    mtp_0_8_accept_len: mtpRun && typeof mtpRun.accept_len_mean === 'number' ? mtpRun.accept_len_mean : null,
    // read-backs a verify round (prefill steps included): 1 when the drafts come back with the
    // verify's picks (engine/speculative/pending-drafts.ts), 2 when they are read back first
    mtp_0_8_read_backs_per_round: mtpRun && typeof mtpRun.read_backs_per_round === 'number' ? mtpRun.read_backs_per_round : null,
    // seeded sampled requests (matched: outputs == MTP off), drafts drawn on the device
    mtp_0_8_sampled_speedup: sampledRun && typeof sampledRun.speedup === 'number' ? sampledRun.speedup : null,
    mtp_0_8_sampled_read_backs_per_round: sampledRun && typeof sampledRun.read_backs_per_round === 'number' ? sampledRun.read_backs_per_round : null,
    // Qwen3.5's recommended sampling (presence penalty 1.5: drafts read back before the verify)
    mtp_0_8_qwen_sampled_speedup: qwenRun && typeof qwenRun.speedup === 'number' ? qwenRun.speedup : null,
    mtp_0_8_qwen_sampled_read_backs_per_round: qwenRun && typeof qwenRun.read_backs_per_round === 'number' ? qwenRun.read_backs_per_round : null,
    pytorch_decode_tok_s: floorTokS,
    decode_over_pytorch: ratio(decodeTokS, floorTokS),
    host_us_per_dispatch: fig(decode, 'gpu', 'host_us_per_dispatch'),
    gpu_ms_per_step: fig(decode, 'gpu', 'gpu_ms_per_step'),
    // overlapped decode (the default, as the engine's greedy decode) ÷ the plain loop, tok/s
    overlap_over_plain: ratio(decodeTokS, fig(r('decode-bf16-plain'), 'tok_s', 'median')),
    skip_validation_over_plain: ratio(fig(r('decode-bf16-skip-validation'), 'tok_s', 'median'), decodeTokS),
    // the adapter's default submits (chunked on a GPU) ÷ one submit a step, decode tok/s
    default_submits_over_single: ratio(decodeTokS, fig(r('decode-bf16-single-submit'), 'tok_s', 'median')),
    // Q4_K_M decode with a separate activation quantization ÷ the default (folded into the matmuls on a GPU)
    q4_k_m_unfolded_over_default: ratio(fig(r('decode-q4_k_m-unfolded'), 'tok_s', 'median'), quant('q4_k_m')),
  };
}

/** Issue 47's GPU targets, on the 4b shape (the 0.8b shape when the 4b one did not run). */
export function targets(summaries) {
  const shape = summaries['qwen3.5-4b']?.decode_tok_s.bf16 != null ? 'qwen3.5-4b' : Object.keys(summaries)[0];
  const s = shape ? summaries[shape] : null;
  return {
    shape: shape ?? null,
    decode_fraction_of_bandwidth: target(s?.decode_fraction_of_bandwidth ?? null, 0.5, '>='),
    verify4_over_decode: target(s?.verify4_over_decode ?? null, 1.15, '<='),
    streams32_over_1: target(s?.streams32_over_1 ?? null, 16, '>='),
    mtp_0_8_speedup: target(s?.mtp_0_8_speedup ?? null, 1.8, '>='),
  };
}

/** The derived part of the JSON: per-shape summaries and the targets. */
export function summarize(runs, shapes, bandwidth) {
  const summaries = Object.fromEntries(shapes.map((s) => [s, shapeSummary(runs, s, bandwidth)]));
  return { bandwidth_tb_s_used: bandwidth.tb_s, shapes: summaries, targets: targets(summaries) };
}

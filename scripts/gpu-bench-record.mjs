// Commits a GPU run in one command: scripts/gpu-bench.sh's JSON → a bench/results file (group
// "gpu": the per-shape table, the issue's targets, a README summary), the raw JSON under
// bench/results/raw/, then `npm run docs:perf` (docs/performance.md and the README).
//   npm run gpu:record -- /work/.device/…/gpu-bench.json [--name h100] [--results DIR] [--no-render]
//                         [--allow-dry] (a lavapipe dry run: tests only) [--force] (a run whose adapter was no GPU)
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const f2 = (x) => (x === null || x === undefined ? null : x.toFixed(2));
const f1 = (x) => (x === null || x === undefined ? null : x.toFixed(1));

/** A cell: the figure, else why there is none (the step failed, was skipped, or never ran). */
function cell(value, runs, steps) {
  if (value !== null) return value;
  for (const s of steps) {
    const r = runs[s];
    if (r?.error) return r.timed_out ? 'timed out' : 'failed';
    if (r?.skipped) return 'skipped';
    if (!r) return 'not run';
  }
  return '—';
}

const COLUMNS = [
  { key: 'shape', label: 'shape (random weights)' },
  { key: 'decode_bf16', label: 'decode BF16 tok/s' },
  { key: 'decode_q8_0', label: 'Q8_0 tok/s' },
  { key: 'decode_q4_k_m', label: 'Q4_K_M tok/s' },
  { key: 'bw_fraction', label: 'BF16 weight GB/s ÷ bandwidth' },
  { key: 'verify4', label: 'verify-4 ÷ decode (step time)' },
  { key: 'streams8', label: '8 streams ÷ 1 (tok/s)' },
  { key: 'streams32', label: '32 streams ÷ 1' },
  { key: 'prefill', label: 'prefill 2048 tok/s' },
  { key: 'mtp', label: 'MTP P = 0.8, on ÷ off' },
  { key: 'pytorch', label: 'PyTorch decode tok/s' },
  { key: 'over_pytorch', label: 'deltaserve ÷ PyTorch' },
  { key: 'host_us', label: 'host µs / dispatch' },
  { key: 'gpu_ms', label: 'GPU ms / step' },
];

/** The bench/results object for a gpu-bench.json report (`seq`: its order in the group). */
export function toResult(rep, { seq, rawFile }) {
  const runs = rep.runs;
  const rows = rep.shapes.map((shape) => {
    const s = rep.summary.shapes[shape];
    const st = (n) => `${shape}.${n}`;
    return {
      shape,
      decode_bf16: cell(f1(s.decode_tok_s.bf16), runs, [st('make-model'), st('decode-bf16')]),
      decode_q8_0: cell(f1(s.decode_tok_s.q8_0), runs, [st('quantize-q8_0'), st('decode-q8_0')]),
      decode_q4_k_m: cell(f1(s.decode_tok_s.q4_k_m), runs, [st('quantize-q4_k_m'), st('decode-q4_k_m')]),
      bw_fraction: cell(f2(s.decode_fraction_of_bandwidth), runs, [st('decode-bf16')]),
      verify4: cell(f2(s.verify4_over_decode), runs, [st('verify-4-bf16')]),
      streams8: cell(f1(s.streams8_over_1), runs, [st('streams-8-bf16')]),
      streams32: cell(f1(s.streams32_over_1), runs, [st('streams-32-bf16')]),
      prefill: cell(f1(s.prefill_2048_tok_s), runs, [st('prefill-2048-bf16')]),
      mtp: cell(f2(s.mtp_0_8_speedup), runs, [st('mtp-0.8-bf16')]),
      pytorch: cell(f1(s.pytorch_decode_tok_s), runs, [st('pytorch-floor-bf16')]),
      over_pytorch: cell(f2(s.decode_over_pytorch), runs, [st('pytorch-floor-bf16')]),
      host_us: cell(f1(s.host_us_per_dispatch), runs, [st('decode-bf16')]),
      gpu_ms: cell(f2(s.gpu_ms_per_step), runs, [st('decode-bf16')]),
    };
  });
  const g = rep.gpu;
  const bw = g.bandwidth;
  const floor = Object.values(runs).find((r) => r?.torch && r?.transformers);
  const t = rep.summary.targets;
  const mark = (x) => (x.met === null ? 'not measured' : x.met ? 'met' : 'NOT met');
  const targetRows = [
    ['decode BF16 weight GB/s ÷ bandwidth', '≥ 0.5', t.decode_fraction_of_bandwidth],
    ['verify-4 ÷ decode (step time)', '≤ 1.15', t.verify4_over_decode], ['32 streams ÷ 1 stream (tok/s)', '≥ 16', t.streams32_over_1],
    ['MTP at P = 0.8, on ÷ off', '≥ 1.8', t.mtp_0_8_speedup],
  ].map(([what, goal, x]) => `| ${what} | ${goal} | ${x.value === null ? '—' : x.value.toFixed(2)} | ${mark(x)} |`);
  const problems = [...rep.failed.map((n) => `\`${n}\`: ${String(runs[n].error).split('\n')[0].slice(0, 300)}`),
    ...rep.skipped.map((n) => `\`${n}\`: skipped (${runs[n].skipped})`), ...(rep.pending ?? []).map((n) => `\`${n}\`: never ran (the call ended first)`)];
  const gpuName = g.name ?? rep.adapter?.description ?? 'no GPU';
  return {
    title: `WebGPU on ${gpuName}: decode, verify, streams, prefill, MTP and the PyTorch floor`,
    group: 'gpu', seq, date: rep.date.slice(0, 10),
    machine: { name: `${gpuName} machine (the device tool's${rep.mode === 'dry' ? ', DRY RUN on lavapipe' : ''})`, cpu: rep.machine.cpu, vcpus: rep.machine.cores, memory_gb: rep.machine.memory_gb,
      cpu_flags: null, notes: `GPU ${gpuName}${g.driver ? `, driver ${g.driver}, ${g.memory_mib} MiB` : ''}; bandwidth used ${bw.tb_s ?? 'unknown'} TB/s (${bw.source})` },
    node: rep.machine.node.replace(/^v/, ''),
    kernel_build: `webgpu (Dawn, the webgpu package) on ${rep.adapter ? `${rep.adapter.vendor} ${rep.adapter.architecture} "${rep.adapter.description}"` : 'no adapter'}`,
    peer: floor ? { name: 'PyTorch + transformers', version: `${floor.torch} / ${floor.transformers}` } : null,
    script: `scripts/gpu-bench.sh (${rep.mode}, ${rep.seconds} s of a ${rep.budget_s} s budget; docs/gpu-bench.md)`,
    model: `${rep.shapes.join(', ')} shapes, BF16 from make-model (random weights), Q8_0 / Q4_K_M from deltaserve quantize`,
    method: 'Every figure is one step of `scripts/gpu-bench.sh` (one process each, `deltaserve bench --kernels webgpu --json`): decode 64 tokens after a 128-token prompt, 3 repeats (median); verify-4 is the step time of 4 rows over a decode step\'s; streams are tok/s of 8 and 32 sequences over one; prefill is 2,048 tokens; MTP is `bench --mode mtp --accept-rate 0.8 --spec-tokens 3` end to end; the PyTorch floor is `transformers` greedy decode of the same safetensors (scripts/gpu-bench-torch.py). The bandwidth fraction is the BF16 weight bytes a decode step reads at the measured step time over the GPU\'s datasheet bandwidth (the table in scripts/gpu-bench-report.mjs; the figure used is in the machine line). Host µs per dispatch and GPU ms per step (timestamp queries) are BF16 decode\'s.',
    columns: COLUMNS, rows,
    notes: [
      `Diagnostics: ${rep.diagnostics.line.replace(/^gpu-bench: /, '')}`,
      ...(rep.summary.shapes[t.shape]?.decode_fraction_of_measured_copy != null
        ? [`Against PyTorch's measured device-to-device copy (${runs['copy-bandwidth'].copy_tb_s.toFixed(2)} TB/s), BF16 decode of ${t.shape} reached ${rep.summary.shapes[t.shape].decode_fraction_of_measured_copy.toFixed(2)}.`] : []),
      `Issue 47's targets (${t.shape ?? 'no shape'}):\n\n| target | goal | measured | |\n|---|---|---|---|\n${targetRows.join('\n')}`,
      ...(problems.length ? [`Steps without a figure: ${problems.join('; ')}.`] : []),
      `Raw output: [\`bench/results/raw/${rawFile}\`](../bench/results/raw/${rawFile}).`,
    ],
    readme_summary: {
      lead: `**On a GPU** (${gpuName}, WebGPU through Dawn, ${rep.date.slice(0, 10)}; bandwidth ${bw.tb_s ?? '?'} TB/s): decode, the bandwidth fraction, verify and streams ratios, MTP and the PyTorch floor.`,
      columns: ['shape', 'decode_bf16', 'bw_fraction', 'verify4', 'streams32', 'mtp', 'pytorch'],
    },
  };
}

/** A short file-name word for the GPU: h100, h200, …, else the name's letters. */
export function gpuSlug(rep) {
  const n = rep.gpu?.name ?? rep.adapter?.description ?? 'unknown';
  const m = /\b([AHLB]\d{2,3}S?)\b/i.exec(n);
  return (m ? m[1] : n).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 24) || 'gpu';
}

function main() {
  const { values: o, positionals } = parseArgs({ allowPositionals: true, options: {
    name: { type: 'string' }, results: { type: 'string' }, 'no-render': { type: 'boolean' }, 'allow-dry': { type: 'boolean' }, force: { type: 'boolean' },
  } });
  const file = positionals[0];
  if (!file) throw new Error('usage: npm run gpu:record -- PATH/gpu-bench.json [--name WORD] [--results DIR] [--no-render]');
  const rep = JSON.parse(readFileSync(file, 'utf8'));
  if (rep.what !== 'scripts/gpu-bench.sh' || rep.format !== 2) throw new Error(`${file}: not a scripts/gpu-bench.sh report of format 2`);
  if (rep.mode !== 'full' && !o['allow-dry']) throw new Error(`${file}: a ${rep.mode} run (lavapipe) is no GPU measurement; --allow-dry records it anyway (tests)`);
  if (!rep.diagnostics?.ok && !o.force) throw new Error(`${file}: the run's diagnostics say it measured no GPU (${rep.diagnostics?.line}); --force records it anyway`);
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const dir = o.results ?? join(root, 'bench', 'results');
  const base = `${rep.date.slice(0, 10)}-${o.name ?? gpuSlug(rep)}-webgpu${rep.mode === 'dry' ? '-dry' : ''}`;
  const seqs = readdirSync(dir).filter((n) => n.endsWith('.json')).map((n) => JSON.parse(readFileSync(join(dir, n), 'utf8')))
    .filter((r) => r.group === 'gpu').map((r) => r.seq);
  mkdirSync(join(dir, 'raw'), { recursive: true });
  copyFileSync(file, join(dir, 'raw', `${base}.gpu-bench.json`));
  const result = toResult(rep, { seq: Math.max(0, ...seqs) + 1, rawFile: `${base}.gpu-bench.json` });
  writeFileSync(join(dir, `${base}.json`), `${JSON.stringify(result, null, 1)}\n`);
  console.log(`wrote ${join(dir, `${base}.json`)} and raw/${base}.gpu-bench.json`);
  if (o['no-render']) return;
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'render-performance.mjs')], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  const lines = readFileSync(join(root, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
  if (lines > 300) console.error(`README.md now has ${lines} lines (test/docs-links allows 300): make room, or drop "readme_summary" from ${base}.json`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();

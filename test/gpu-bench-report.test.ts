// scripts/gpu-bench.sh's parts that need no GPU and no lavapipe: the bandwidth table, the
// verdict on the adapter (a CPU emulation on the GPU machine is a useless run), the ratios
// and targets, the step plan's order, the step runner's time boxes and partial results, and
// the result file `npm run gpu:record` writes from a report.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './paths.js';

type Runs = Record<string, Record<string, unknown>>;
interface Bandwidth { tb_s: number | null; copy_tb_s: number | null; matched: string | null; source: string }
interface Step { name: string; kind: string; lane?: string; cap: number; needs: string[]; makes: string | null; args: string[] }
interface Target { value: number | null; target: number; met: boolean | null }
interface Summary { bandwidth_tb_s_used: number | null; shapes: Record<string, Record<string, number | null>>; targets: Record<string, Target> & { shape: string } }
const load = async <T>(name: string): Promise<T> => (await import(pathToFileURL(join(REPO_ROOT, 'scripts', name)).href)) as T;
const report = await load<{
  gpuBandwidth(gpu: string | null, adapter: string, override?: string): Bandwidth;
  verdict(adapter: object | null, gpu: object | null, mode: string): { ok: boolean; runWebgpu: boolean; line: string };
  summarize(runs: Runs, shapes: string[], bw: Bandwidth): Summary;
}>('gpu-bench-report.mjs');
const steps = await load<{
  planSteps(mode: string, shapes: string[], work: string, torch: string, cores?: number): Step[];
  runSteps(steps: Step[], o: { dir: string; deadline: number; command: (s: Step) => { cmd: string; args: string[]; env: NodeJS.ProcessEnv }; after: (r: Runs) => void }): Promise<Runs>;
}>('gpu-bench-steps.mjs');
const record = await load<{ toResult(rep: object, o: { seq: number; rawFile: string }): { rows: Record<string, string>[]; notes: string[] } & Record<string, unknown> }>('gpu-bench-record.mjs');
const render = await load<{ validateResult(file: string, r: object): void }>('render-performance.mjs');

test('the bandwidth comes from the detected GPU, not a fixed H200 figure', () => {
  const h100 = report.gpuBandwidth('NVIDIA H100 80GB HBM3', '');
  assert.equal(h100.tb_s, 3.35);
  assert.equal(h100.copy_tb_s, 3.0);
  const h200 = report.gpuBandwidth('NVIDIA H200', '');
  assert.equal(h200.tb_s, 4.8);
  assert.match(h200.source, /4\.3 TB\/s/, 'the issue\'s figure is named');
  assert.equal(report.gpuBandwidth('NVIDIA H100 PCIe', '').tb_s, 2.0);
  assert.equal(report.gpuBandwidth('NVIDIA H200 NVL', '').tb_s, 4.8);
  // no nvidia-smi: the adapter's description decides
  assert.equal(report.gpuBandwidth(null, 'nvidia hopper NVIDIA H100 80GB HBM3').tb_s, 3.35);
  const unknown = report.gpuBandwidth('Some GPU', 'mesa software llvmpipe');
  assert.equal(unknown.tb_s, null);
  assert.match(unknown.source, /unknown GPU.*GPU_BENCH_BANDWIDTH_TBS/);
  assert.equal(report.gpuBandwidth('NVIDIA H100 80GB HBM3', '', '2.5').tb_s, 2.5, 'the override wins');
  assert.throws(() => report.gpuBandwidth(null, '', 'fast'), /GPU_BENCH_BANDWIDTH_TBS/);
});

test('a CPU emulation on the GPU machine is a useless run, said loudly', () => {
  const llvmpipe = { vendor: 'mesa', architecture: 'software', description: 'llvmpipe (LLVM 15)', cpuEmulation: true };
  const gpu = { name: 'NVIDIA H100 80GB HBM3' };
  const bad = report.verdict(llvmpipe, gpu, 'full');
  assert.equal(bad.ok, false);
  assert.equal(bad.runWebgpu, false);
  assert.match(bad.line, /USELESS RUN.*llvmpipe.*H100/);
  assert.equal(report.verdict(llvmpipe, null, 'dry').ok, true, 'expected in a dry run');
  const none = report.verdict(null, gpu, 'full');
  assert.ok(!none.ok && !none.runWebgpu && /NO WEBGPU ADAPTER/.test(none.line));
  const real = report.verdict({ vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H100 80GB HBM3', cpuEmulation: false }, gpu, 'full');
  assert.ok(real.ok && real.runWebgpu && /real GPU/.test(real.line));
});

const bench = (ms: number, tokS: number, extra: object = {}) => ({ ms_per_step: { median: ms }, tok_s: { median: tokS }, ...extra });

test('the ratios and the issue\'s targets, from the steps\' JSON', () => {
  const s = 'qwen3.5-4b';
  const runs: Runs = {
    [`${s}.decode-bf16`]: bench(10, 100, { achieved_gbs: 1675, gpu: { host_us_per_dispatch: 30, gpu_ms_per_step: 8 } }),
    [`${s}.verify-4-bf16`]: bench(11, 364),
    [`${s}.streams-32-bf16`]: bench(20, 1700),
    [`${s}.streams-8-bf16`]: { error: 'out of memory', timed_out: false },
    [`${s}.mtp-0.8-bf16`]: { runs: [{ accept: 0.8, speedup: 1.9, accept_len_mean: 2.9 }] },
    [`${s}.pytorch-floor-bf16`]: { decode_tok_s: 40, torch: '2.11', transformers: '5.17' },
    'copy-bandwidth': { copy_tb_s: 3.0 },
  };
  const bw = report.gpuBandwidth('NVIDIA H100 80GB HBM3', '');
  const sum = report.summarize(runs, ['qwen3.5-0.8b', s], bw);
  const x = sum.shapes[s]!;
  assert.equal(sum.bandwidth_tb_s_used, 3.35);
  assert.equal(x['decode_fraction_of_bandwidth'], 0.5);
  assert.ok(Math.abs(x['decode_fraction_of_measured_copy']! - 1675 / 3000) < 1e-12);
  assert.equal(x['verify4_over_decode'], 1.1);
  assert.equal(x['streams32_over_1'], 17);
  assert.equal(x['streams8_over_1'], null, 'a failed step gives no figure');
  assert.equal(x['decode_over_pytorch'], 2.5);
  assert.equal(sum.targets.shape, s, 'the targets are the 4b shape\'s');
  assert.deepEqual(sum.targets['decode_fraction_of_bandwidth'], { value: 0.5, target: 0.5, met: true });
  assert.equal(sum.targets['verify4_over_decode']!.met, true);
  assert.equal(sum.targets['streams32_over_1']!.met, true);
  assert.equal(sum.targets['mtp_0_8_speedup']!.met, true);
  // on an H200 the same figures fall short of half its bandwidth
  assert.equal(report.summarize(runs, [s], report.gpuBandwidth('NVIDIA H200', '')).targets['decode_fraction_of_bandwidth']!.met, false);
  assert.equal(report.summarize({}, [s], bw).targets['mtp_0_8_speedup']!.met, null, 'not measured is not failed');
});

test('the plan: every shape\'s sanity decode first, the targets on the largest shape next, quantized files last', () => {
  const plan = steps.planSteps('full', ['qwen3.5-0.8b', 'qwen3.5-4b'], '/w', 't.py', 16);
  const names = plan.map((s) => s.name);
  // making files is CPU work: it runs in its own lane beside the measurements, on half the cores
  for (const s of plan) assert.equal(s.lane, /make-model|quantize/.test(s.name) ? 'prep' : 'main', s.name);
  assert.deepEqual(plan.find((s) => s.name === 'qwen3.5-4b.quantize-q4_k_m')!.args.slice(-2), ['--threads', '8']);
  assert.deepEqual(names.slice(0, 5), ['qwen3.5-0.8b.make-model', 'qwen3.5-0.8b.decode-bf16', 'qwen3.5-4b.make-model', 'qwen3.5-4b.decode-bf16', 'qwen3.5-4b.verify-4-bf16']);
  assert.ok(names.indexOf('qwen3.5-4b.mtp-0.8-bf16') < names.indexOf('qwen3.5-0.8b.verify-4-bf16'));
  assert.ok(names.slice(-8).every((n) => /quantize|q8_0|q4_k_m/.test(n)), names.slice(-8).join());
  assert.equal(new Set(names).size, names.length);
  plan.forEach((s, i) => {
    for (const need of s.needs) assert.ok(plan.slice(0, i).some((p) => p.makes === need), `${s.name} needs ${need} made before it`);
  });
  const dry = steps.planSteps('dry', ['qwen3.5-0.8b', 'qwen3.5-4b'], '/w', 't.py');
  assert.deepEqual(dry.map((s) => s.name), names, 'a dry run has the same steps by the same names');
  assert.ok(dry.every((s, i) => s.cap === 8 * plan[i]!.cap), 'lavapipe on a loaded machine gets 8× the time boxes');
});

test('each step in its own time box: a hung step is killed, a failing one keeps its stderr, the rest still run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-bench-steps-'));
  try {
    const made = join(dir, 'model');
    const plan: Step[] = [
      { name: 'make', kind: 'x', cap: 30, needs: [], makes: made, args: [`require('fs').mkdirSync(${JSON.stringify(made)}); console.log(JSON.stringify({ made: true }))`] },
      { name: 'hangs', kind: 'x', cap: 1, needs: [made], makes: null, args: ['setInterval(() => {}, 1000)'] },
      { name: 'fails', kind: 'x', cap: 30, needs: [made], makes: null, args: ['console.error("GPU out of memory: the 4b shape"); process.exit(3)'] },
      { name: 'no-json', kind: 'x', cap: 30, needs: [], makes: null, args: ['console.log("hello")'] },
      { name: 'makes-nothing', kind: 'x', cap: 30, needs: [], makes: join(dir, 'q'), args: ['process.exit(1)'] },
      { name: 'needs-nothing-made', kind: 'x', cap: 30, needs: [join(dir, 'q')], makes: null, args: ['console.log("{}")'] },
      { name: 'ok', kind: 'x', cap: 30, needs: [made], makes: null, args: ['console.log("noise\\n" + JSON.stringify({ tok_s: { median: 5 } }))'] },
    ];
    mkdirSync(join(dir, 'r'));
    const partial: string[][] = [];
    const t0 = performance.now();
    const runs = await steps.runSteps(plan, {
      dir: join(dir, 'r'), deadline: performance.now() + 60_000,
      command: (s) => ({ cmd: process.execPath, args: ['-e', s.args[0]!], env: process.env }),
      after: (r) => partial.push(Object.keys(r)),
    });
    assert.ok(performance.now() - t0 < 30_000, 'the hung step did not hold the run');
    assert.deepEqual(partial.map((p) => p.length), [1, 2, 3, 4, 5, 6, 7], 'the JSON is rewritten after every step');
    assert.equal(runs['make']!['made'], true);
    assert.equal(runs['hangs']!['timed_out'], true);
    assert.match(String(runs['hangs']!['error']), /timed out after 1 s/);
    assert.match(String(runs['fails']!['error']), /GPU out of memory/);
    assert.equal(runs['fails']!['exit_code'], 3);
    assert.match(String(runs['no-json']!['error']), /without a JSON line/);
    assert.match(String(runs['needs-nothing-made']!['skipped']), /input was not made.*makes-nothing/);
    assert.equal((runs['ok']!['tok_s'] as { median: number }).median, 5);
    assert.equal(existsSync(made), false, 'an artifact no later step needs is deleted');
    // a spent budget skips what is left
    const late = await steps.runSteps(plan.slice(3, 4), { dir: join(dir, 'r'), deadline: performance.now() + 1000,
      command: (s) => ({ cmd: process.execPath, args: ['-e', s.args[0]!], env: process.env }), after: () => {} });
    assert.match(String(late['no-json']!['skipped']), /time budget was spent/);
    // lanes side by side: a measurement waits for its file, and the next ready one goes first
    const file = join(dir, 'slow-file');
    const lanes: Step[] = [
      { name: 'make-slowly', kind: 'x', lane: 'prep', cap: 30, needs: [], makes: file, args: [`setTimeout(() => { require('fs').writeFileSync(${JSON.stringify(file)}, ''); console.log('{}') }, 1500)`] },
      { name: 'measure-file', kind: 'x', lane: 'main', cap: 30, needs: [file], makes: null, args: [`console.log(JSON.stringify({ had: require('fs').existsSync(${JSON.stringify(file)}) }))`] },
      { name: 'measure-now', kind: 'x', lane: 'main', cap: 30, needs: [], makes: null, args: ['console.log("{}")'] },
    ];
    const both = await steps.runSteps(lanes, { dir: join(dir, 'r'), deadline: performance.now() + 60_000,
      command: (s) => ({ cmd: process.execPath, args: ['-e', s.args[0]!], env: process.env }), after: () => {} });
    assert.ok((both['measure-now']!['started_s'] as number) < 1, 'a ready step went ahead of one waiting for the other lane\'s file');
    assert.equal(both['measure-file']!['had'], true, 'a step starts once its file is made');
    assert.ok((both['measure-file']!['started_s'] as number) >= 1.4);
    await assert.rejects(steps.runSteps([lanes[1]!, { ...lanes[0]!, lane: 'main' }], { dir, deadline: 0, command: () => ({ cmd: '', args: [], env: {} }), after: () => {} }),
      /made later in its lane/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gpu:record turns a report into a valid bench/results file, each missing figure saying why', () => {
  const s = 'qwen3.5-4b';
  const runs: Runs = {
    [`${s}.make-model`]: { bytes: 1 }, [`${s}.decode-bf16`]: bench(10, 100, { achieved_gbs: 1675, gpu: { host_us_per_dispatch: 30, gpu_ms_per_step: 8 } }),
    [`${s}.verify-4-bf16`]: { error: 'killed', timed_out: true }, [`${s}.streams-32-bf16`]: { skipped: 'the run\'s time budget was spent' },
    [`${s}.pytorch-floor-bf16`]: { decode_tok_s: 40, torch: '2.11.0', transformers: '5.17.0' },
  };
  const bw = report.gpuBandwidth('NVIDIA H100 80GB HBM3', '');
  const rep = {
    what: 'scripts/gpu-bench.sh', format: 2, mode: 'full', date: '2026-12-05T15:00:00.000Z', seconds: 400, budget_s: 450, shapes: [s],
    diagnostics: { ok: true, line: 'gpu-bench: DIAGNOSTICS OK: adapter "NVIDIA H100 80GB HBM3" is a real GPU' },
    machine: { cpu: 'Intel Xeon', cores: 16, memory_gb: 128, node: 'v24.22.3' },
    gpu: { name: 'NVIDIA H100 80GB HBM3', driver: '580.159.04', memory_mib: 81559, bandwidth: bw },
    adapter: { vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H100 80GB HBM3' },
    failed: [`${s}.verify-4-bf16`], skipped: [`${s}.streams-32-bf16`], pending: [`${s}.prefill-2048-bf16`],
    summary: report.summarize(runs, [s], bw), runs,
  };
  const r = record.toResult(rep, { seq: 1, rawFile: 'x.gpu-bench.json' });
  render.validateResult('x.json', r);
  const row = r.rows[0]!;
  assert.equal(row['decode_bf16'], '100.0');
  assert.equal(row['bw_fraction'], '0.50');
  assert.equal(row['verify4'], 'timed out');
  assert.equal(row['streams32'], 'skipped');
  assert.equal(row['prefill'], 'not run');
  assert.equal(row['over_pytorch'], '2.50');
  assert.match(r.notes.join('\n'), /never ran/);
  assert.match(JSON.stringify(r['machine']), /3\.35 TB\/s/);
});

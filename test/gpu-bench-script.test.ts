// scripts/gpu-bench.sh --dry-run: the GPU machine's one-call benchmark, run here on tiny
// settings (1 layer + the MTP head, a few tokens: each step once, cheaply) on the machine's
// WebGPU adapter (lavapipe without a GPU). Every step of the real run happens — the adapter
// probe, make-model, quantize to Q8_0 and Q4_K_M, the webgpu benches, the MTP bench, the
// PyTorch floor and copy bandwidth — and one JSON file comes out whose runs carry their
// figures and whose summary carries the ratios; the torch steps may only fail for want of
// torch / transformers / CUDA, and say so. `gpu:record` turns that JSON into a valid
// bench/results file. And the device tool's invocation in docs/gpu-bench.md fits its limits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './paths.js';

interface GpuFields {
  dispatches_per_step: number; host_us_per_dispatch: number | null; host_cpu_us_per_dispatch: number | null; bind_groups_per_step: number; gpu_ms_per_step: number | null;
  gpu_time_source: string; queue_done_ms_per_step: number; dawn_toggles: string[]; submits_per_step: number;
}
interface BenchRun { error?: string; skipped?: string; tok_s?: { median: number }; gpu?: GpuFields; batch?: number }
interface Report {
  mode: string; finished: boolean; failed: string[]; skipped: string[]; pending: string[];
  diagnostics: { ok: boolean; line: string; webgpu_steps_run: boolean; loader: string };
  gpu: { bandwidth: { tb_s: number | null; source: string } };
  adapter: { description: string; cpuEmulation: boolean; limits: Record<string, number>; features: { timestamps: boolean } } | null;
  summary: { shapes: Record<string, Record<string, unknown> & { decode_tok_s: Record<string, number | null> }> };
  runs: Record<string, BenchRun & Record<string, unknown>>;
}

const MIB = 1024 * 1024;
/** What the device tool takes (its README's Limits), and what --pack's bundle may use of it
 * when it is not packed here (node.xz ~28 MB + app.tar.xz ~5 MB + the loader). */
const LIMITS = { command: 2000, carryPaths: 8, carryPathChars: 200, travel: 64 * MIB, timeout: 600 };
const BUNDLE_BUDGET = 36 * MIB;

test('docs/gpu-bench.md gives the device tool a call within its limits', () => {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'gpu-bench.md'), 'utf8');
  const m = /<!-- gpu-bench-run -->\s*```json\n([\s\S]*?)```/.exec(doc);
  assert.ok(m, 'docs/gpu-bench.md has the run arguments in a json block after <!-- gpu-bench-run -->');
  const call = JSON.parse(m[1]!.replace(/^ {3}/gm, '')) as { command: string; carry: string[]; timeout_s: number };
  assert.ok(call.command.length <= LIMITS.command, `command: ${call.command.length} characters`);
  assert.match(call.command, /bash scripts\/gpu-bench\.sh\b/);
  assert.match(call.command, /\$OUT/, 'the log goes under $OUT, which comes back');
  assert.ok(call.carry.length >= 1 && call.carry.length <= LIMITS.carryPaths, `${call.carry.length} carried paths`);
  for (const p of call.carry) {
    assert.ok(p.length <= LIMITS.carryPathChars, p);
    // a carried path is an ignored one (the tracked tree travels anyway)
    const ignored = spawnSync('git', ['check-ignore', '-q', p], { cwd: REPO_ROOT });
    assert.equal(ignored.status, 0, `${p} is git-ignored`);
  }
  assert.deepEqual(call.carry, ['.gpu-bench'], 'the bundle --pack writes is what travels besides the tree');
  const budget = Number(/--budget (\d+)/.exec(call.command)?.[1]);
  assert.ok(call.timeout_s <= LIMITS.timeout && call.timeout_s >= budget + 60, `timeout_s ${call.timeout_s} covers the budget ${budget} s and the unpacking`);
  // the tree that travels (tracked + untracked-not-ignored) and the bundle
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  const tree = files.reduce((n, f) => n + (existsSync(join(REPO_ROOT, f)) ? readFileSync(join(REPO_ROOT, f)).length : 0), 0);
  const bundleDir = join(REPO_ROOT, '.gpu-bench');
  const bundle = existsSync(bundleDir) ? Number(execFileSync('du', ['-sb', bundleDir], { encoding: 'utf8' }).split('\t')[0]) : BUNDLE_BUDGET;
  assert.ok(tree + bundle <= LIMITS.travel, `tree ${(tree / MIB).toFixed(1)} MiB + bundle ${(bundle / MIB).toFixed(1)} MiB > 64 MiB`);
});

test('gpu-bench.sh --dry-run writes one JSON with every step measured', { timeout: 3_600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-bench-'));
  try {
    const r = spawnSync('bash', [join(REPO_ROOT, 'scripts', 'gpu-bench.sh'), '--dry-run', '--out', join(dir, 'out'), '--work', join(dir, 'work')],
      { encoding: 'utf8', cwd: REPO_ROOT });
    assert.equal(r.status, 0, `gpu-bench.sh failed: ${r.stdout.slice(-2000)}${r.stderr.slice(-2000)}`);
    assert.match(r.stdout.split('\n')[0]!, /^gpu-bench: DIAGNOSTICS OK: adapter ".*" is a CPU emulation \(expected in a dry run\).*Vulkan loader .*; ICD /,
      'the first line is the diagnostics');
    const j = JSON.parse(readFileSync(join(dir, 'out', 'gpu-bench.json'), 'utf8')) as Report;
    assert.equal(j.mode, 'dry');
    assert.equal(j.finished, true);
    assert.deepEqual(j.pending, []);
    assert.ok(j.adapter?.description && j.adapter.cpuEmulation && j.adapter.limits['maxStorageBufferBindingSize']! > 0, 'the adapter, its limits');
    assert.ok(j.diagnostics.ok && j.diagnostics.webgpu_steps_run);
    assert.equal(j.gpu.bandwidth.tb_s, null, 'lavapipe is no GPU of the table');
    const s = 'qwen3.5-0.8b';
    const torchSteps = [`${s}.pytorch-floor-bf16`, 'copy-bandwidth'];
    assert.deepEqual(j.failed.filter((n) => !torchSteps.includes(n)), [], 'only the PyTorch steps may fail');
    assert.deepEqual(j.skipped, []);
    for (const n of torchSteps) {
      const f = j.runs[n]!;
      assert.ok(f['decode_tok_s'] !== undefined || f['copy_tb_s'] !== undefined || /torch|transformers|model|CUDA/.test(String(f.error)), `${n}: ${JSON.stringify(f)}`);
    }
    const timestamps = j.adapter.features.timestamps === true;
    for (const name of ['decode-bf16', 'decode-q8_0', 'decode-q4_k_m', 'verify-4-bf16', 'streams-8-bf16', 'streams-32-bf16', 'prefill-2048-bf16']) {
      const run = j.runs[`${s}.${name}`];
      assert.ok(run && !run.error, `${name}: ${JSON.stringify(run)}`);
      assert.ok(run.tok_s!.median > 0, `${name}: tok/s`);
      const g = run.gpu!;
      assert.ok(g.dispatches_per_step > 0 && g.host_us_per_dispatch! > 0, `${name}: dispatches and host time per dispatch`);
      // the script runs Node 24 (process.threadCpuUsage): a figure, not null. Thread CPU time
      // advances in scheduler ticks (~ms), so a dry run's two ~1.5 ms steps may read 0
      const cpu = g.host_cpu_us_per_dispatch;
      assert.ok(typeof cpu === 'number' && cpu >= 0, `${name}: host CPU per dispatch (${cpu})`);
      assert.equal(g.bind_groups_per_step, g.dispatches_per_step, `${name}: one bind group per dispatch`);
      assert.ok(g.queue_done_ms_per_step > 0, `${name}: queue completion time`);
      // GPU time per step: from timestamps where the adapter has them, else null with the reason
      if (timestamps) assert.ok(g.gpu_ms_per_step! > 0 && /timestamp queries/.test(g.gpu_time_source), `${name}: ${g.gpu_time_source}`);
      else assert.ok(g.gpu_ms_per_step === null && /no timestamp-query/.test(g.gpu_time_source), `${name}: ${g.gpu_time_source}`);
      assert.ok(Array.isArray(g.dawn_toggles), `${name}: the Dawn toggles in force`);
    }
    assert.deepEqual([j.runs[`${s}.streams-8-bf16`]!.batch, j.runs[`${s}.streams-32-bf16`]!.batch], [2, 3], 'the dry run\'s stream counts');
    const skip = j.runs[`${s}.decode-bf16-skip-validation`];
    assert.ok(skip && !skip.error && skip.gpu!.host_us_per_dispatch! > 0, `decode with validation skipped: ${JSON.stringify(skip)}`);
    assert.deepEqual(skip.gpu!.dawn_toggles, ['skip_validation'], 'the run reports the toggle it ran with');
    const plain = j.runs[`${s}.decode-bf16-plain`] as unknown as { overlap?: boolean; error?: string } | undefined;
    assert.ok(plain && !plain.error && plain.overlap === false, `decode in the plain loop: ${JSON.stringify(plain)}`);
    assert.equal((j.runs[`${s}.decode-bf16`] as unknown as { overlap?: boolean }).overlap, true, 'decode overlapped by default');
    const single = j.runs[`${s}.decode-bf16-single-submit`];
    assert.ok(single && !single.error && single.gpu!.submits_per_step === 1, `decode with one submit a step: ${JSON.stringify(single)}`);
    const unfolded = j.runs[`${s}.decode-q4_k_m-unfolded`];
    assert.ok(unfolded && !unfolded.error && unfolded.gpu!.host_us_per_dispatch! > 0, `Q4_K_M decode, activation quantization separate: ${JSON.stringify(unfolded)}`);
    const mtp = j.runs[`${s}.mtp-0.8-bf16`] as unknown as { runs: { accept: number; outputs_identical: boolean; speedup: number }[] };
    assert.equal(mtp.runs[0]!.accept, 0.8);
    assert.equal(mtp.runs[0]!.outputs_identical, true);
    assert.ok(mtp.runs[0]!.speedup > 0);
    // the summary is computed from those runs
    const sum = j.summary.shapes[s]!;
    for (const k of ['verify4_over_decode', 'streams8_over_1', 'streams32_over_1', 'mtp_0_8_speedup', 'host_us_per_dispatch']) assert.ok((sum[k] as number) > 0, `summary ${k}`);
    assert.ok(sum.decode_tok_s['bf16']! > 0 && sum.decode_tok_s['q8_0']! > 0 && sum.decode_tok_s['q4_k_m']! > 0);
    assert.equal(sum['decode_fraction_of_bandwidth'], null, 'no bandwidth, no fraction');
    // one command from the JSON to a bench/results file that docs:perf accepts
    const results = join(dir, 'results');
    mkdirSync(results);
    const rec = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'gpu-bench-record.mjs'), join(dir, 'out', 'gpu-bench.json'), '--results', results, '--no-render'], { encoding: 'utf8' });
    assert.notEqual(rec.status, 0, 'a dry run is refused without --allow-dry');
    assert.match(rec.stderr, /a dry run \(lavapipe\) is no GPU measurement/);
    const ok = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'gpu-bench-record.mjs'), join(dir, 'out', 'gpu-bench.json'), '--results', results, '--no-render', '--allow-dry'], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
    const render = (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'render-performance.mjs')).href)) as { loadResults(d: string): { group: string; rows: Record<string, string>[] }[] };
    const [result] = render.loadResults(results);
    assert.equal(result!.group, 'gpu');
    assert.match(result!.rows[0]!['decode_bf16']!, /^\d+\.\d$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// scripts/gpu-bench.sh --dry-run: the GPU machine's one-call benchmark, run here on tiny
// settings (1 layer + the MTP head, a few tokens: each step once, cheaply) on the machine's WebGPU adapter
// (lavapipe without a GPU). Every step of the real run happens — make-model, quantize to Q8_0 and Q4_K_M, the webgpu benches, the MTP bench
// and the PyTorch floor — and one JSON file comes out whose runs carry their figures; the
// floor may only fail for want of torch / transformers, and says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

interface GpuFields {
  dispatches_per_step: number; host_us_per_dispatch: number | null; host_cpu_us_per_dispatch: number | null; bind_groups_per_step: number; gpu_ms_per_step: number | null;
  gpu_time_source: string; queue_done_ms_per_step: number; dawn_toggles: string[];
}
interface BenchRun { error?: string; tok_s?: { median: number }; gpu?: GpuFields }

test('gpu-bench.sh --dry-run writes one JSON with every step measured', { timeout: 1_200_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-bench-'));
  try {
    const r = spawnSync('bash', [join(REPO_ROOT, 'scripts', 'gpu-bench.sh'), '--dry-run', '--out', join(dir, 'out'), '--work', join(dir, 'work')],
      { encoding: 'utf8', cwd: REPO_ROOT });
    assert.equal(r.status, 0, `gpu-bench.sh failed: ${r.stderr.slice(-2000)}`);
    const j = JSON.parse(readFileSync(join(dir, 'out', 'gpu-bench.json'), 'utf8')) as
      { mode: string; adapter: { description: string } | null; failed: string[]; runs: Record<string, BenchRun & Record<string, unknown>> };
    assert.equal(j.mode, 'dry');
    assert.ok(j.adapter?.description, 'the adapter the benches ran on');
    const s = 'qwen3.5-0.8b';
    const floor = `${s}.pytorch-floor-bf16`;
    assert.deepEqual(j.failed.filter((n) => n !== floor), [], 'only the PyTorch floor may fail');
    const f = j.runs[floor]!;
    assert.ok(f['decode_tok_s'] !== undefined || /torch|transformers|model/.test(String(f.error)), `floor: ${JSON.stringify(f)}`);
    const timestamps = (j.adapter as { features?: { timestamps?: boolean } }).features?.timestamps === true;
    for (const name of ['decode-bf16', 'decode-q8_0', 'decode-q4_k_m', 'verify-4-bf16', 'streams-2-bf16', 'streams-3-bf16', 'prefill-8-bf16']) {
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
    const skip = j.runs[`${s}.decode-bf16-skip-validation`];
    assert.ok(skip && !skip.error && skip.gpu!.host_us_per_dispatch! > 0, `decode with validation skipped: ${JSON.stringify(skip)}`);
    assert.deepEqual(skip.gpu!.dawn_toggles, ['skip_validation'], 'the run reports the toggle it ran with');
    const mtp = j.runs[`${s}.mtp-0.8-bf16`] as { runs: { accept: number; outputs_identical: boolean; speedup: number }[] };
    assert.equal(mtp.runs[0]!.accept, 0.8);
    assert.equal(mtp.runs[0]!.outputs_identical, true);
    assert.ok(mtp.runs[0]!.speedup > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// `deltaserve bench --mode decode --sample`: the report's shape on the built-in model, and
// clear errors for flags it cannot honour.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('bench --sample reports sampled vs greedy decode with the pick times', () => {
  const r = cli(['bench', '--mode', 'decode', '--sample', '--temperature', '0.8', '--top-p', '0.95', '--top-k', '20', '--min-p', '0.05',
    '--presence-penalty', '1.5', '--logprobs', '5', '--batch', '2', '--gen-tokens', '3', '--prompt-tokens', '8', '--repeat', '2', '--threads', '2']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as Record<string, unknown> & { sample: Record<string, unknown> };
  assert.deepEqual(out.sample, { temperature: 0.8, top_p: 0.95, top_k: 20, min_p: 0.05, presence_penalty: 1.5, frequency_penalty: 0,
    repetition_penalty: 1, top_logprobs: 5 });
  assert.equal(out['batch'], 2);
  for (const key of ['greedy_ms_per_step', 'sampled_ms_per_step', 'overhead_pct', 'greedy_pick_ms_per_row', 'sample_ms_per_row', 'step_overhead_pct']) {
    const v = out[key] as { median: number; min: number; max: number };
    assert.ok(Number.isFinite(v.median) && v.min <= v.median && v.median <= v.max, `${key}: ${JSON.stringify(v)}`);
  }
  assert.ok((out['sample_ms_per_row'] as { min: number }).min > 0);
  assert.ok(Number.isFinite(out['pick_overhead_pct']));
});

test('bench --sample rejects what it cannot measure, naming the flag', () => {
  const cases: [string[], RegExp][] = [
    [['--mode', 'verify', '--sample'], /--sample needs --mode decode/],
    [['--sample', '--temperature', '0'], /--sample needs --temperature > 0/],
    [['--sample', '--logprobs', '30'], /--logprobs must be in 0\.\.20/],
    [['--sample', '--top-p', '1.5'], /top_p/],
  ];
  for (const [args, msg] of cases) {
    const r = cli(['bench', ...args, '--gen-tokens', '1', '--repeat', '1']);
    assert.notEqual(r.status, 0, args.join(' '));
    assert.match(r.stderr, msg);
  }
});
